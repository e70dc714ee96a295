import { hostname } from 'node:os';
import { DelayedError, type Job } from 'bullmq';
import type { Kysely, Transaction } from 'kysely';
import {
  IdempotencyConfigError,
  IdempotencyConflictError,
  IdempotencyInProgressError,
  IllegalTransitionError,
  RecordedFailureError,
  SealError,
  StaleEpochError,
  UnknownOutcomeError,
} from '../errors/errors.js';
import { ERROR_CODES, isIdempotencyError } from '../errors/idempotency-error.js';
import { fingerprint } from '../fingerprint/fingerprint.js';
import { fingerprintKeyId } from '../fingerprint/keyed-fingerprint.js';
import { boundedKey, type IdempotencyKey, parseIdempotencyKey } from '../keys/idempotency-key.js';
import type { ClaimOptions, ClaimOutcome, LedgerRecord, LedgerStatus, RecordedError } from '../ledger/types.js';
import type { Operation } from '../operation/define-operation.js';
import { assertRetentionCovers, BULLMQ_DEFAULTS, retryWindowMs } from '../operation/retry-window.js';
import type { Keyring } from '../sealing/keyring.js';
import { asError, recordedError, sealThrown } from '../sealing/sealed-error.js';
import { isSealedResult, SEALED_FIELD, sealResult } from '../sealing/sealed-result.js';
import { bullmqSignal, isSealedForBullmq, unrecoverable } from './bullmq-signals.js';
import { classifyError, type ErrorClass } from './classify.js';
import { asIdempotencyError } from './error-record.js';
import { isInfraError, LedgerUnreachableError, ledgerBackoff, ledgerUnreachable } from './infra-error.js';
import { LeaseKeeper } from './lease-keeper.js';
import { resolveJob } from './resolve-job.js';
import type { ProcessorContext, StepContext, WithIdempotencyOptions, WrapperEvent, WrapperEventType } from './types.js';

/** The processor a user writes: the validated input and a context holding the lease. */
export type IdempotentProcessor<I, R, DB = unknown> = (input: I, ctx: ProcessorContext<DB>) => Promise<R>;

type Attempt = {
  /** For a step: the operation's key. */
  parentK?: string;
  job: Job;
  token: string | undefined;
  key: IdempotencyKey;
  k: string;
  taskId: string | undefined;
  facts: { attemptsMade: number; attemptsStarted: number; stalledCounter: number };
};

/**
 * The per-attempt state machine behind withIdempotency(): parse → key + fingerprint → claim →
 * run, replay, refuse or wait. Talks to the ledger, never writes SQL itself.
 */
export class AttemptRunner<I, R, DB> {
  private readonly owner: string;
  private readonly db: Kysely<DB>;
  private readonly pollMs: number;
  private readonly keyring: Keyring;

  constructor(
    private readonly op: Operation,
    private readonly processor: IdempotentProcessor<I, R, DB>,
    private readonly deps: WithIdempotencyOptions<DB>,
  ) {
    this.owner = deps.owner ?? `${hostname()}:${process.pid}`;
    this.db = (deps.db ?? deps.ledger.db) as Kysely<DB>;
    if (!deps.keyring || typeof deps.keyring.seal !== 'function') {
      throw new IdempotencyConfigError(
        `Operation ${op.name}: withIdempotency needs a keyring (defineKeyring) to seal results and error text`,
        { option: 'keyring' },
      );
    }
    this.keyring = deps.keyring;
    this.pollMs = deps.inProgressPollMs ?? Math.min(1000, Math.max(50, Math.floor(op.leaseMs / 10)));
    const lockDuration = deps.worker?.lockDuration ?? BULLMQ_DEFAULTS.lockDuration;
    if (op.leaseMs >= lockDuration) {
      throw new IdempotencyConfigError(
        `Operation ${op.name}: lease ${op.leaseMs} ms must be shorter than the worker's lockDuration ${lockDuration} ms, so a crashed attempt's lease has expired when BullMQ redelivers the job`,
        { option: 'lease', leaseMs: op.leaseMs, lockDuration },
      );
    }
    if (deps.jobOptions) {
      assertRetentionCovers(op.name, op.retentionMs, retryWindowMs(deps.jobOptions, deps.worker, op.retryWindow));
    }
  }

  async run(job: Job, token: string | undefined, signal: AbortSignal | undefined): Promise<unknown> {
    try {
      return await this.attempt(job, token, signal);
    } catch (err) {
      const unreachable = ledgerUnreachable(err);
      if (unreachable && token) return this.defer(job, token, unreachable);
      // Whatever BullMQ gets is stored in Redis (failedReason, stacktrace): seal its text first.
      throw this.forBullmq(unreachable?.cause ?? err);
    }
  }

  /**
   * The ledger could not be asked (a claim, or a write the attempt could not land while it held
   * its lease): the job waits as a delayed job, which uses no BullMQ attempt, and its next
   * attempt asks the ledger again: it replays, takes over or finds `unknown`, as after a crash.
   */
  private async defer(job: Job, token: string, err: LedgerUnreachableError): Promise<never> {
    const waitMs = ledgerBackoff.next();
    this.deps.logger?.warn(
      {
        jobId: job.id,
        what: err.what,
        code: (err.cause as { code?: unknown } | undefined)?.code,
        waitMs,
        consecutiveFailures: ledgerBackoff.consecutiveFailures,
      },
      'ledger unreachable: job delayed',
    );
    await job.moveToDelayed(Date.now() + waitMs, token);
    throw new DelayedError();
  }

  /**
   * A ledger write after the side effect ran, asked again with backoff while the attempt holds
   * its lease (`signal` fires when the keeper cannot keep it) and for at most two leases; then a
   * {@link LedgerUnreachableError}, and the job is deferred. A write that landed although its
   * answer was lost meets its own state on the retry: `landed` reads it from the record.
   */
  private async persist<T>(
    what: string,
    signal: AbortSignal,
    write: () => Promise<T>,
    landed?: { key: string; epoch: number; status: LedgerStatus; value: (rec: LedgerRecord) => T },
  ): Promise<T> {
    const deadline = performance.now() + 2 * this.op.leaseMs;
    let failedBefore = false;
    for (;;) {
      try {
        const out = await write();
        ledgerBackoff.reset();
        return out;
      } catch (err) {
        if (failedBefore && landed && err instanceof IllegalTransitionError) {
          const rec = await this.deps.ledger.get(landed.key).catch((e: unknown) => {
            if (isInfraError(e)) throw new LedgerUnreachableError(what, e);
            throw e;
          });
          if (rec && rec.epoch === landed.epoch && rec.status === landed.status) return landed.value(rec);
        }
        if (!isInfraError(err)) throw err;
        failedBefore = true;
        const left = deadline - performance.now();
        if (signal.aborted || left <= 0) throw new LedgerUnreachableError(what, err);
        await pause(Math.min(left, Math.max(25, this.op.leaseMs / 4), ledgerBackoff.next()), signal);
      }
    }
  }

  /**
   * An error as BullMQ may store it: BullMQ's control-flow errors and the library's own refusals
   * as they are; anything else with its code and class in clear and its text sealed.
   */
  private forBullmq(err: unknown): unknown {
    if (bullmqSignal(err) === 'wait' || isSealedForBullmq(err)) return err;
    return sealThrown(asError(err), recordedError(err, this.keyring));
  }

  private async attempt(job: Job, token: string | undefined, signal: AbortSignal | undefined): Promise<unknown> {
    const facts = {
      attemptsMade: job.attemptsMade ?? 0,
      attemptsStarted: job.attemptsStarted ?? 0,
      stalledCounter: job.stalledCounter ?? 0,
    };
    let input: I;
    let a: Attempt;
    let fp: string;
    try {
      const resolved = resolveJob(this.op, job, this.keyring);
      input = resolved.input as I;
      a = { job, token, key: resolved.key, k: boundedKey(resolved.key), taskId: resolved.taskId, facts };
      assertRetentionCovers(
        this.op.name,
        this.op.retentionMs,
        retryWindowMs(job.opts ?? {}, this.deps.worker, this.op.retryWindow),
      );
      fp = this.op.fingerprintOf(input, this.keyring);
    } catch (err) {
      if (!isIdempotencyError(err)) throw err;
      const type: WrapperEventType = err.code === 'IDEMPOTENCY_MISSING_KEY' ? 'missing_key' : 'invalid_input';
      this.emit({ job, facts }, type, 'deny', { reasonCode: err.code });
      this.deps.logger?.warn({ jobId: job.id, code: err.code }, 'job refused before any side effect');
      throw unrecoverable(err);
    }

    let claimed: Awaited<ReturnType<typeof this.claim>>;
    try {
      claimed = await this.claim(input, fp, {
        key: a.key,
        operation: this.op.name,
        fingerprint: fp,
        leaseMs: this.op.leaseMs,
        retentionMs: this.op.retentionMs,
        downstream: this.op.downstream,
        owner: this.owner,
        ...(job.id ? { jobId: job.id } : {}),
        queue: job.queueName,
        ...(a.taskId ? { taskId: a.taskId } : {}),
      });
    } catch (err) {
      // Nothing has run: the job waits (delayed, no attempt used) and claims again.
      throw isInfraError(err) ? new LedgerUnreachableError('claim', err) : err;
    }
    ledgerBackoff.reset();
    const claim = claimed.claim;
    fp = claimed.fingerprint;
    switch (claim.kind) {
      case 'acquired':
        this.emit(a, claim.transition === 'takeover' ? 'takeover' : 'claimed', 'allow', {
          epoch: claim.epoch,
          at: claim.at,
        });
        return this.execute(a, input, fp, claim, signal);
      case 'completed':
        this.emit(a, 'replayed', 'allow', { epoch: claim.epoch, at: claim.at });
        return claim.result;
      case 'conflict': {
        this.emit(a, 'conflict', 'deny', { reasonCode: 'IDEMPOTENCY_CONFLICT', at: claim.at });
        const { kind: _k, at: _at, ...details } = claim;
        throw unrecoverable(new IdempotencyConflictError(details));
      }
      case 'inProgress': {
        this.emit(a, 'in_progress', 'deny', {
          reasonCode: 'IDEMPOTENCY_IN_PROGRESS',
          epoch: claim.epoch,
          at: claim.at,
        });
        // Wait without using an attempt: poll again soon (the holder usually finishes well
        // within its lease), and never later than the moment its lease would lapse.
        const waitMs = Math.max(25, Math.min(claim.retryAfterMs, this.pollMs)) + Math.floor(Math.random() * 25);
        if (!token) throw new IdempotencyInProgressError({ key: a.k, retryAfterMs: claim.retryAfterMs });
        await job.moveToDelayed(Date.now() + waitMs, token);
        throw new DelayedError();
      }
      case 'failed':
        this.emit(a, 'failed', 'deny', { reasonCode: claim.error.code, epoch: claim.epoch, at: claim.at });
        throw unrecoverable(new RecordedFailureError({ key: a.k, error: claim.error }));
      case 'unknown':
        this.emit(a, 'unknown', 'pending_confirmation', {
          reasonCode: claim.error?.code ?? 'IDEMPOTENCY_UNKNOWN_OUTCOME',
          epoch: claim.epoch,
          at: claim.at,
        });
        throw unrecoverable(new UnknownOutcomeError({ key: a.k, epoch: claim.epoch }));
    }
  }

  /**
   * Claims the operation's key. A conflict whose stored fingerprint was keyed with another key of
   * the ring (made before a rotation) is checked again with that key: the same input under the
   * same key is no conflict, and the claim goes on with the stored fingerprint.
   */
  private async claim(
    input: I,
    fp: string,
    options: ClaimOptions,
  ): Promise<{ claim: ClaimOutcome; fingerprint: string }> {
    const claim = await this.deps.ledger.claim(options);
    if (claim.kind !== 'conflict') return { claim, fingerprint: fp };
    const stored = claim.storedFingerprint;
    const keyId = fingerprintKeyId(stored);
    let again: string | undefined;
    if (keyId !== undefined && !this.keyring.has(keyId)) {
      // The key that made the stored fingerprint was removed from the ring while its record is
      // still kept: the input cannot be compared, so nothing runs; say why, not "conflict".
      throw unrecoverable(new SealError(ERROR_CODES.sealKeyUnknown, { keyId, purpose: 'fingerprint' }));
    }
    if (keyId !== undefined && keyId !== this.keyring.currentId) {
      again = this.op.fingerprintOf(input, this.keyring, keyId);
    } else if (keyId === undefined && /^[0-9a-f]{64}$/.test(stored)) {
      // Recorded before fingerprints were keyed: compared in the form it was made in.
      again = fingerprint(this.op.name, this.op.definition.effect(input));
    }
    if (again !== stored) return { claim, fingerprint: fp };
    return { claim: await this.deps.ledger.claim({ ...options, fingerprint: stored }), fingerprint: stored };
  }

  /** Runs the processor while holding the lease, then records the outcome under the epoch. */
  private async execute(
    a: Attempt,
    input: I,
    fp: string,
    claim: Extract<ClaimOutcome, { kind: 'acquired' }>,
    outer: AbortSignal | undefined,
  ): Promise<unknown> {
    const { ledger } = this.deps;
    const epoch = claim.epoch;
    const keeper = new LeaseKeeper(ledger, a.k, epoch, this.op.leaseMs, claim, a.job, a.token, outer);
    try {
      if (claim.transition === 'takeover' && this.op.downstream === 'reconcile') {
        const settled = await this.reconcile(a, input, epoch, keeper.signal);
        if (settled) return settled.result;
      }
      let recorded: { result: unknown } | undefined;
      /** ctx.tx could not reach the database: its writes and its completion did not commit together. */
      let txUnreachable: unknown;
      let decisions = 0;
      const ctx: ProcessorContext<DB> = {
        idempotencyKey: a.k,
        key: a.key,
        epoch,
        takeover: claim.transition === 'takeover',
        ...a.facts,
        taskId: a.taskId,
        get signal() {
          return keeper.signal;
        },
        job: a.job,
        token: a.token,
        tx: async <T>(fn: (trx: Transaction<DB>) => Promise<T>): Promise<T> => {
          if (recorded)
            throw new IllegalTransitionError({ key: a.k, from: 'completed', action: 'open a second ctx.tx' });
          let value!: T;
          let done: Awaited<ReturnType<typeof ledger.complete>>;
          try {
            done = await this.db.transaction().execute(async (trx) => {
              value = await fn(trx);
              // Fenced like any completion: a stale epoch rolls back fn's writes with it.
              return ledger.complete(a.k, epoch, this.resultToRecord(value), trx as unknown as Kysely<unknown>);
            });
          } catch (err) {
            // Committed with the completion or not at all: the next attempt finds which.
            if (isInfraError(err)) txUnreachable ??= err;
            throw err;
          }
          ledgerBackoff.reset();
          recorded = done; // only once the transaction has committed
          this.emit(a, 'completed', 'allow', { epoch, at: done.at });
          return value;
        },
        step: (name, fn) => this.step(a, fp, name, keeper.signal, fn),
        // The sink's own promise (already handled: not awaiting it reports no rejection), or a resolved one.
        audit: (d) =>
          Promise.resolve(
            this.emit(a, 'decision', d.decision, {
              epoch,
              seq: decisions++,
              ...(d.reasonCode ? { reasonCode: d.reasonCode } : {}),
              details: {
                ...d.details,
                action: d.action,
                resourceType: d.resourceType,
                resourceId: d.resourceId,
                actorType: d.actorType,
                actorId: d.actorId,
              },
            }),
          ),
      };
      let value: R;
      try {
        value = await this.processor(input, ctx);
      } catch (err) {
        if (recorded) return recorded.result; // ctx.tx committed; a later error changes nothing recorded
        if (txUnreachable !== undefined && causedBy(err, txUnreachable)) {
          throw new LedgerUnreachableError('ctx.tx', err);
        }
        return await this.onProcessorError(a, input, epoch, err, keeper.signal);
      }
      if (recorded) return recorded.result;
      return await this.record(a, epoch, value, keeper.signal);
    } finally {
      keeper.stop();
    }
  }

  private async record(a: Attempt, epoch: number, value: unknown, signal: AbortSignal): Promise<unknown> {
    const { ledger } = this.deps;
    try {
      const sealed = this.resultToRecord(value);
      const done = await this.persist('complete', signal, () => ledger.complete(a.k, epoch, sealed), {
        key: a.k,
        epoch,
        status: 'completed',
        value: completedReceipt,
      });
      this.emit(a, 'completed', 'allow', { epoch, at: done.at });
      return done.result;
    } catch (err) {
      if (err instanceof StaleEpochError) {
        // The side effect ran but another attempt holds the key now: report, never drop silently.
        this.emit(a, 'stale_completion', 'deny', { epoch, reasonCode: err.code });
        this.deps.logger?.error(
          { key: a.k, epoch, currentEpoch: err.details.currentEpoch },
          'completion rejected: stale epoch',
        );
        throw err; // retryable: the next attempt replays whatever the current holder records
      }
      if (isIdempotencyError(err)) {
        // The effect has run but its result cannot be recorded (cannot be sealed, too large,
        // fails the result schema): running it again would double it, so it needs an operator.
        await this.markUnknown(a, epoch, recordedError(err, this.keyring), signal);
        throw unrecoverable(err);
      }
      throw err;
    }
  }

  /**
   * What the ledger records and BullMQ keeps, for this and every later attempt: the result checked
   * against the operation's schema, then sealed exactly, with the declared public fields in clear.
   */
  private resultToRecord(value: unknown): unknown {
    this.op.parseResult(value);
    return sealResult(value, this.op.publicResult, this.keyring);
  }

  /** Classifies a processor error into a ledger outcome, then lets BullMQ act on it. */
  private async onProcessorError(
    a: Attempt,
    input: I,
    epoch: number,
    err: unknown,
    signal: AbortSignal,
  ): Promise<unknown> {
    // A step that could not reach the ledger (the processor rethrew or wrapped its error): the
    // job waits and runs again; its steps' records tell the next attempt what ran.
    const unreachable = ledgerUnreachable(err);
    if (unreachable) throw unreachable;
    const cls = classifyError(err, this.op.downstream);
    try {
      if (cls === 'reconcile') {
        const settled = await this.reconcile(a, input, epoch, signal);
        if (settled) return settled.result;
        await this.recordError(a, epoch, err, 'retryable', signal); // not committed: BullMQ retries
        throw err;
      }
      await this.recordError(a, epoch, err, cls, signal);
    } catch (thrown) {
      if (thrown instanceof StaleEpochError) {
        this.emit(a, 'stale_completion', 'deny', { epoch, reasonCode: thrown.code });
        throw err; // fenced: another attempt owns the key; BullMQ retries and replays its outcome
      }
      throw thrown;
    }
    if (cls === 'wait' || cls === 'retryable') throw err;
    if (cls === 'terminal') {
      throw bullmqSignal(err) === 'unrecoverable'
        ? err
        : unrecoverable(asIdempotencyError(err, recordedError(err, this.keyring)));
    }
    throw unrecoverable(err instanceof UnknownOutcomeError ? err : new UnknownOutcomeError({ key: a.k, epoch }));
  }

  /** Writes what an error means to the ledger row of an attempt or a step. */
  private async recordError(
    a: Attempt,
    epoch: number,
    err: unknown,
    cls: Exclude<ErrorClass, 'reconcile'>,
    signal: AbortSignal,
  ): Promise<void> {
    const { ledger } = this.deps;
    const error = recordedError(err, this.keyring);
    if (cls === 'unknown') return this.markUnknown(a, epoch, error, signal);
    const mode = cls === 'terminal' ? 'terminal' : 'retryable';
    const { at } =
      cls === 'wait'
        ? await this.persist('release', signal, () => ledger.release(a.k, epoch), landedAs(a.k, epoch, 'released'))
        : await this.persist(
            'fail',
            signal,
            () => ledger.fail(a.k, epoch, error, mode),
            landedAs(a.k, epoch, mode === 'terminal' ? 'failed' : 'released'),
          );
    this.emit(a, cls === 'terminal' ? 'failed' : 'released', cls === 'terminal' ? 'deny' : 'allow', {
      epoch,
      at,
      reasonCode: error.code,
    });
  }

  /**
   * Asks the reconcile hook what an ambiguous attempt did. Committed: records the result found.
   * Not committed: releases the key (returns undefined). Cannot tell: marks unknown and throws.
   */
  private async reconcile(
    a: Attempt,
    input: I,
    epoch: number,
    signal: AbortSignal,
  ): Promise<{ result: unknown } | undefined> {
    const hook = this.op.definition.reconcile;
    if (!hook) return undefined;
    const found = await hook({ input, key: a.key, idempotencyKey: a.k, signal });
    if (found.committed === true) {
      const sealed = this.resultToRecord(found.result);
      const done = await this.persist('complete', signal, () => this.deps.ledger.complete(a.k, epoch, sealed), {
        key: a.k,
        epoch,
        status: 'completed',
        value: completedReceipt,
      });
      this.emit(a, 'reconciled', 'allow', { epoch, at: done.at, reasonCode: 'RECONCILED_COMMITTED' });
      return { result: done.result };
    }
    if (found.committed === false) {
      this.emit(a, 'reconciled', 'allow', { epoch, reasonCode: 'RECONCILED_NOT_COMMITTED' });
      return undefined;
    }
    await this.markUnknown(
      a,
      epoch,
      { code: 'IDEMPOTENCY_UNKNOWN_OUTCOME', message: 'reconcile could not tell' },
      signal,
    );
    throw unrecoverable(new UnknownOutcomeError({ key: a.k, epoch }));
  }

  private async markUnknown(a: Attempt, epoch: number, error: RecordedError, signal: AbortSignal): Promise<void> {
    const { at } = await this.persist(
      'markUnknown',
      signal,
      () => this.deps.ledger.markUnknown(a.k, epoch, error),
      landedAs(a.k, epoch, 'unknown'),
    );
    this.emit(a, 'unknown', 'pending_confirmation', { epoch, at, reasonCode: error.code });
  }

  /** One ledger row per step, keyed from the operation key: a resumed job skips finished steps. */
  private async step<T>(
    a: Attempt,
    fp: string,
    name: string,
    signal: AbortSignal,
    fn: (s: StepContext) => Promise<T>,
  ): Promise<T> {
    const { ledger } = this.deps;
    const key = parseIdempotencyKey({ ...a.key, resourceKey: `${a.key.resourceKey}#step=${name}` });
    const k = boundedKey(key);
    const stepFp = fingerprint(`${this.op.name}#${name}`, fp);
    // Monotonic: a wall clock stepped back (NTP) must not stretch the wait.
    const deadline = performance.now() + 3 * this.op.leaseMs;
    for (;;) {
      // Asked again while the operation's lease holds: nothing of this step has run yet.
      const claim = await this.persist('step claim', signal, () =>
        ledger.claim({
          key,
          operation: `${this.op.name}#${name}`,
          fingerprint: stepFp,
          leaseMs: this.op.leaseMs,
          retentionMs: this.op.retentionMs,
          downstream: this.op.downstream,
          owner: this.owner,
          ...(a.job.id ? { jobId: a.job.id } : {}),
          queue: a.job.queueName,
          ...(a.taskId ? { taskId: a.taskId } : {}),
          stepId: name,
        }),
      );
      const s = { ...a, key, k, parentK: a.k };
      switch (claim.kind) {
        case 'completed':
          this.emit(s, 'replayed', 'allow', { epoch: claim.epoch, at: claim.at, stepId: name });
          return this.openStepResult<T>(claim.result);
        case 'acquired': {
          this.emit(s, claim.transition === 'takeover' ? 'takeover' : 'claimed', 'allow', {
            epoch: claim.epoch,
            at: claim.at,
            stepId: name,
          });
          const keeper = new LeaseKeeper(ledger, k, claim.epoch, this.op.leaseMs, claim, undefined, undefined, signal);
          try {
            let value: T;
            try {
              value = await fn({ idempotencyKey: k, key, epoch: claim.epoch, signal: keeper.signal });
            } catch (err) {
              // Record the step's own outcome (a step has no reconcile hook: ambiguous means
              // unknown), then hand the parent an error that it classifies the same way.
              const cls = classifyError(err, this.op.downstream);
              const stepClass = cls === 'reconcile' ? 'unknown' : cls;
              await this.recordError(s, claim.epoch, err, stepClass, keeper.signal);
              throw stepClass === 'unknown' && !(err instanceof UnknownOutcomeError)
                ? new UnknownOutcomeError({ key: k, epoch: claim.epoch })
                : err;
            }
            // Sealed whole, like an operation's result; the step returns its own value, exactly.
            const sealed = { [SEALED_FIELD]: this.keyring.seal(value, 'result') };
            const done = await this.persist(
              'step complete',
              keeper.signal,
              () => ledger.complete(k, claim.epoch, sealed),
              { key: k, epoch: claim.epoch, status: 'completed', value: completedReceipt },
            );
            this.emit(s, 'completed', 'allow', { epoch: claim.epoch, at: done.at, stepId: name });
            return value;
          } finally {
            keeper.stop();
          }
        }
        case 'inProgress':
          // A crashed attempt's step lease has not run out yet: wait for as long as Postgres says
          // it still runs, bounded, and no longer than this attempt holds its own lease.
          if (performance.now() > deadline) throw new UnknownOutcomeError({ key: k, epoch: claim.epoch });
          await pause(Math.min(this.op.leaseMs, Math.max(25, claim.retryAfterMs)), signal);
          signal.throwIfAborted();
          continue;
        case 'failed':
          throw new RecordedFailureError({ key: k, error: claim.error });
        case 'conflict': {
          const { kind: _k, at: _at, ...details } = claim;
          throw new IdempotencyConflictError(details);
        }
        case 'unknown':
          throw new UnknownOutcomeError({ key: k, epoch: claim.epoch });
      }
    }
  }

  /** A finished step's recorded result, opened; one recorded before results were sealed, as it is. */
  private openStepResult<T>(recorded: unknown): T {
    return isSealedResult(recorded)
      ? this.keyring.open<T>(recorded[SEALED_FIELD] as string, 'result')
      : (recorded as T);
  }

  private emit(
    a: Pick<Attempt, 'job' | 'facts'> & Partial<Attempt>,
    type: WrapperEventType,
    decision: WrapperEvent['decision'],
    extra: Partial<WrapperEvent> = {},
  ): void | Promise<void> {
    const sink = this.deps.audit;
    if (!sink) return;
    const event: WrapperEvent = {
      type,
      operation: this.op.name,
      decision,
      queue: a.job.queueName,
      attemptsMade: a.facts.attemptsMade,
      attemptsStarted: a.facts.attemptsStarted,
      stalledCounter: a.facts.stalledCounter,
      ...extra,
      // Database time of the transition when the ledger gave one; otherwise the time of emission.
      at: extra.at ?? new Date(),
    };
    // Assigned rather than spread: this runs for every transition of every job.
    if (a.k) event.key = a.k;
    if (a.parentK) event.parentKey = a.parentK;
    if (a.job.id) event.jobId = a.job.id;
    if (a.taskId) event.taskId = a.taskId;
    return sink.emit(event);
  }
}

/** The receipt of a completion that landed although its answer was lost, read from the record. */
function completedReceipt(rec: LedgerRecord): { at: Date; result: unknown } {
  return { at: rec.completedAt ?? rec.updatedAt, result: rec.result };
}

/** A fail, release or markUnknown that landed although its answer was lost. */
function landedAs(key: string, epoch: number, status: LedgerStatus) {
  return { key, epoch, status, value: (rec: LedgerRecord) => ({ at: rec.updatedAt }) };
}

/** True when `err` is `target` or wraps it (a processor may wrap ctx.tx's error). */
function causedBy(err: unknown, target: unknown): boolean {
  for (let e: unknown = err, depth = 0; depth < 5; e = (e as Error).cause, depth++) {
    if (e === target) return true;
    if (!(e instanceof Error)) return false;
  }
  return false;
}

/** Waits `ms`, or less when `signal` aborts. */
function pause(ms: number, signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
  });
}
