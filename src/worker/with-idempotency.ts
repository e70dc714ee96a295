import type { Job } from 'bullmq';
import type { z } from 'zod';
import { parkedMark, recheckParked } from '../confirm/parked-job.js';
import { isInfraError } from '../db/unreachable.js';
import { RecordLostError, StaleEpochError } from '../errors/errors.js';
import { isIdempotencyError } from '../errors/idempotency-error.js';
import { ObservedLedger, observedSink } from '../observability/observed.js';
import { runPhase } from '../observability/observer.js';
import type { Operation } from '../operation/operation.js';
import { assertRetentionCovers, retryWindowMs } from '../operation/retry-window.js';
import { unrecoverable } from '../sealing/bullmq-errors.js';
import { checkResult, type SealedResult } from '../sealing/sealed-result.js';
import type { WrapperEventType } from '../shared/wrapper-event.js';
import {
  type FailedAttemptAt,
  failedAttempt,
  settleProcessorError,
  waitForHolder,
  waitForLedger,
} from './answer-bullmq.js';
import { type Claimed, claimKey, claimOptions, decideClaim } from './claim.js';
import { LeaseKeeper } from './lease-keeper.js';
import { AttemptEvents, LedgerUnreachableError, ledgerBackoff, ledgerUnreachable, OutcomeRecorder } from './record.js';
import { factsOf, identifiersOf, resolveJob, resolveSettings } from './resolve.js';
import { newContextState, ProcessorContextFactory, StepRunner } from './run.js';
import type {
  Acquired,
  AttemptScope,
  ContextState,
  IdempotentProcessor,
  RunnerSettings,
  WithIdempotencyOptions,
} from './types.js';

/** The processor, ledger and audit sink as an observer sees them (unchanged without one). */
function observed<I, R, DB>(
  operation: string,
  processor: IdempotentProcessor<I, R, DB>,
  options: WithIdempotencyOptions<DB>,
): [IdempotentProcessor<I, R, DB>, WithIdempotencyOptions<DB>] {
  const { observer } = options;
  if (!observer) return [processor, options];
  const ids = identifiersOf(options as WithIdempotencyOptions<unknown>);
  const run: IdempotentProcessor<I, R, DB> = (input, ctx) =>
    runPhase(
      observer,
      'run',
      {
        operation,
        key: ctx.idempotencyKey,
        epoch: ctx.epoch,
        attemptsMade: ctx.attemptsMade,
        queue: ctx.job.queueName,
        ...(ctx.job.id ? { jobId: ids('jobId', ctx.job.id, { operationId: ctx.idempotencyKey }) } : {}),
      },
      () => processor(input, ctx),
    );
  return [
    run,
    {
      ...options,
      ledger: new ObservedLedger(options.ledger, operation, observer),
      audit: observedSink(options.audit, observer),
    },
  ];
}

/**
 * Wraps a processor so each intended operation takes effect at most once, whatever BullMQ
 * re-runs: retries, stalls, operator replays, duplicate adds. Returns a BullMQ processor
 * declared with three parameters, so BullMQ passes its AbortSignal.
 *
 * What the processor returns is recorded exactly and sealed; BullMQ gets (and every replay
 * returns) a {@link SealedResult}: the operation's `publicResult` fields in clear and the whole
 * value sealed. `unseal(job.returnvalue, keyring)` gives back exactly what the processor returned.
 *
 * @example
 * const worker = new Worker('assets', withIdempotency(createAsset, async (input, ctx) => {
 *   const res = await api.createAsset(input, { idempotencyKey: ctx.idempotencyKey, signal: ctx.signal });
 *   return { assetId: res.id };
 * }, { ledger, keyring }), { connection });
 */
export function withIdempotency<S extends z.ZodType, R, P extends string, DB = unknown>(
  operation: Operation<S, R, P>,
  processor: IdempotentProcessor<z.output<S>, R, DB>,
  options: WithIdempotencyOptions<DB>,
): (job: Job, token?: string, signal?: AbortSignal) => Promise<SealedResult<R, P>> {
  const runner = new AttemptRunner(operation as unknown as Operation, ...observed(operation.name, processor, options));
  // Three declared parameters: BullMQ passes the signal only when processor.length >= 3.
  return function idempotentProcessor(job: Job, token?: string, signal?: AbortSignal): Promise<SealedResult<R, P>> {
    return runner.run(job, token, signal) as Promise<SealedResult<R, P>>;
  };
}

/** A job read and keyed: what the claim needs. */
type Parsed<I> = { scope: AttemptScope; input: I; fingerprint: string };

/**
 * The per-attempt state machine behind withIdempotency(), one method per phase:
 * {@link AttemptRunner.parse} (input, key, fingerprint) → {@link AttemptRunner.claim} →
 * {@link AttemptRunner.dispatch} (run, replay, wait or refuse, the same mapping as a step's) →
 * {@link AttemptRunner.execute} (the processor under the lease, its outcome recorded by the
 * {@link OutcomeRecorder}). Talks to the ledger, never writes SQL itself.
 */
export class AttemptRunner<I, R, DB> {
  private readonly s: RunnerSettings<DB>;
  private readonly events: AttemptEvents;
  private readonly recorder: OutcomeRecorder;
  private readonly contexts: ProcessorContextFactory<DB>;

  constructor(
    op: Operation,
    private readonly processor: IdempotentProcessor<I, R, DB>,
    options: WithIdempotencyOptions<DB>,
  ) {
    this.s = resolveSettings(op, options);
    this.events = new AttemptEvents(op.name, options.audit);
    this.recorder = new OutcomeRecorder(this.s as RunnerSettings<unknown>, this.events);
    this.contexts = new ProcessorContextFactory(this.s, this.recorder, new StepRunner(this.recorder));
  }

  /** One attempt of `job`. Whatever BullMQ gets is stored in Redis (failedReason, stacktrace): its text is sealed first. */
  async run(job: Job, token: string | undefined, signal: AbortSignal | undefined): Promise<unknown> {
    const at: FailedAttemptAt = { job };
    try {
      const parsed = this.parse(job, token);
      at.key = parsed.scope.k;
      // A job parked by ctx.confirm() looks at its request first: still pending, it parks again unclaimed.
      if (token && parkedMark(job.data))
        await recheckParked(this.contexts.confirmations(), job, token, parsed.scope.k, this.s.options.logger);
      const claimed = await this.claim(parsed);
      return await this.dispatch(parsed, claimed, signal);
    } catch (err) {
      const unreachable = ledgerUnreachable(err);
      // The ledger could not be asked: the job waits (delayed, no attempt used) and asks again.
      if (unreachable && token) return waitForLedger(job, token, unreachable, this.s.options.logger, this.s.ids);
      throw this.forBullmq(unreachable?.cause ?? err, at);
    }
  }

  /** Phase 1: the job's input, key and fingerprint. Anything malformed is refused before any side effect. */
  private parse(job: Job, token: string | undefined): Parsed<I> {
    const facts = factsOf(job);
    const { op, keyring } = this.s;
    try {
      const resolved = resolveJob(op, job, keyring);
      const input = resolved.input as I;
      const scope: AttemptScope = {
        job,
        token,
        key: resolved.key,
        k: resolved.k,
        taskId: resolved.taskId,
        facts,
      };
      assertRetentionCovers(
        op.name,
        op.retentionMs,
        retryWindowMs(job.opts ?? {}, this.s.options.worker, op.retryWindow),
      );
      return { scope, input, fingerprint: op.fingerprintOf(input, keyring) };
    } catch (err) {
      if (!isIdempotencyError(err)) throw err;
      const type: WrapperEventType = err.code === 'IDEMPOTENCY_MISSING_KEY' ? 'missing_key' : 'invalid_input';
      this.events.emit({ job, facts }, type, 'deny', { reasonCode: err.code });
      throw unrecoverable(err);
    }
  }

  /** Phase 2: claims the operation's key. Nothing has run: a ledger it cannot reach makes the job wait. */
  private async claim(p: Parsed<I>): Promise<Claimed> {
    const options = claimOptions(this.s as RunnerSettings<unknown>, p.scope, this.s.op.name, p.fingerprint);
    try {
      const claimed = await claimKey(this.s as RunnerSettings<unknown>, options, { value: p.input });
      ledgerBackoff.reset();
      return claimed;
    } catch (err) {
      throw isInfraError(err) ? new LedgerUnreachableError('claim', err) : err;
    }
  }

  /** Phase 3: acts on the claim, by the mapping an operation and its steps share ({@link decideClaim}). */
  private dispatch(p: Parsed<I>, claimed: Claimed, signal: AbortSignal | undefined): Promise<unknown> | unknown {
    const decision = decideClaim(claimed.claim, p.scope, this.events);
    switch (decision.kind) {
      case 'run':
        return this.execute(p, claimed.fingerprint, decision.claim, signal);
      case 'replay':
        // What BullMQ gets is the row as stored, once it is proven this row's: sealed for this
        // operation and key, its clear fields those of its sealed copy.
        try {
          checkResult(decision.result, this.s.keyring, this.recorder.placeOf(p.scope));
        } catch (err) {
          throw isIdempotencyError(err) ? unrecoverable(err) : err;
        }
        return decision.result;
      case 'wait':
        return waitForHolder(p.scope, decision.retryAfterMs, this.s.pollMs);
      case 'refuse':
        throw unrecoverable(decision.error);
    }
  }

  /** Phase 4: runs the processor while holding the lease, then records the outcome under the epoch. */
  private async execute(p: Parsed<I>, fp: string, claim: Acquired, outer: AbortSignal | undefined): Promise<unknown> {
    const { scope, input } = p;
    const epoch = claim.epoch;
    const keeper = new LeaseKeeper({
      ledger: this.s.options.ledger,
      key: scope.k,
      epoch,
      leaseMs: this.s.op.leaseMs,
      granted: claim,
      job: scope.job,
      token: scope.token,
      outer,
    });
    try {
      if (claim.transition === 'takeover' && this.s.op.downstream === 'reconcile') {
        const settled = await this.recorder.reconcile(scope, input, epoch, keeper.signal);
        if (settled) return settled.result;
      }
      const state = newContextState();
      const ctx = this.contexts.create({ scope, fingerprint: fp, claim, keeper, state });
      let value: R;
      try {
        value = await this.processor(input, ctx);
      } catch (err) {
        return await this.onProcessorError(p, epoch, err, keeper, state);
      }
      if (state.recorded) return state.recorded.result;
      // The keeper, not its signal: the signal is made only if the completion has to be asked again.
      return (await this.recorder.complete(scope, epoch, value, keeper)).result;
    } catch (err) {
      let thrown = err;
      // The operation's own row was lost (a step's lost row is its step's to meet): never stale.
      if (err instanceof RecordLostError && err.details.key === scope.k) {
        const claimed = claimOptions(this.s as RunnerSettings<unknown>, scope, this.s.op.name, fp);
        try {
          return await this.recorder.recordLost(scope, claimed, epoch, err, keeper);
        } catch (lost) {
          thrown = lost;
        }
      }
      throw this.forBullmq(thrown, { job: scope.job, key: scope.k, epoch }); // told here, where the epoch is known
    } finally {
      keeper.stop();
    }
  }

  /** The processor threw: what its context saw decides first, then the error's class. */
  private async onProcessorError(
    p: Parsed<I>,
    epoch: number,
    err: unknown,
    keeper: LeaseKeeper,
    state: ContextState,
  ): Promise<unknown> {
    if (state.recorded) return state.recorded.result; // ctx.tx committed; a later error changes nothing recorded
    if (state.txUnreachable !== undefined && causedBy(err, state.txUnreachable)) {
      throw new LedgerUnreachableError('ctx.tx', err);
    }
    if (state.held && causedBy(err, state.held.error)) {
      // A step is held by another attempt: let go of the operation and wait, as an operation in
      // progress elsewhere does. Fenced already (stale): another attempt owns it; waiting is right too.
      await this.recorder.recordError(p.scope, epoch, state.held.error, 'wait', keeper.signal).catch((e: unknown) => {
        if (!(e instanceof StaleEpochError)) throw e;
      });
      return waitForHolder(state.held.scope, state.held.retryAfterMs, this.s.pollMs);
    }
    return settleProcessorError(this.recorder, p.scope, p.input, epoch, err, keeper.signal);
  }

  /**
   * An error as BullMQ may store it: BullMQ's control-flow errors as they are; anything else as a
   * new error with its code and class in clear, its text sealed, and one warn line about it.
   */
  private forBullmq(err: unknown, at: FailedAttemptAt): unknown {
    return failedAttempt(err, at, {
      ...this.s.options,
      keyring: this.s.keyring,
      operation: this.s.op.name,
      ids: this.s.ids,
    });
  }
}

/** True when `err` is `target` or wraps it (a processor may wrap the error the library gave it). */
export function causedBy(err: unknown, target: unknown): boolean {
  for (let e: unknown = err, depth = 0; depth < 5; e = (e as Error).cause, depth++) {
    if (e === target) return true;
    if (!(e instanceof Error)) return false;
  }
  return false;
}
