import { types } from 'node:util';
import { isInfraError } from '../db/unreachable.js';
import { IllegalTransitionError, RecordLostError, StaleEpochError, UnknownOutcomeError } from '../errors/errors.js';
import { ERROR_CODES, IdempotencyError, isIdempotencyError } from '../errors/idempotency-error.js';
import type { AttemptLedger } from '../ledger/postgres-ledger.js';
import { TRANSITIONS, type TransitionSpec } from '../ledger/transitions.js';
import type { ClaimOptions, LedgerRecord, LedgerStatus, RecordedError, Transition } from '../ledger/types.js';
import { unrecoverable } from '../sealing/bullmq-errors.js';
import { recordedError } from '../sealing/sealed-error.js';
import { type ResultPlace, sealResult } from '../sealing/sealed-result.js';
import { Backoff, pause } from '../shared/timing.js';
import type { AuditSink, WrapperEvent, WrapperEventType } from '../shared/wrapper-event.js';
import type { AttemptScope, Completed, ErrorClass, EventScope, RunnerSettings, SignalSource } from './types.js';

// Recording what became of an attempt: the ledger's fenced writes (asked again while the lease
// holds), the audit event of each transition, and the ledger that could not be reached.

/**
 * Builds the audit events of one operation's attempts and hands them to the sink. Every ledger
 * transition an attempt makes or finds is reported here, for the operation and its steps alike.
 */
export class AttemptEvents {
  constructor(
    private readonly operation: string,
    private readonly sink: AuditSink | undefined,
  ) {}

  /**
   * Reports the event of a ledger transition the attempt made or found: its type, decision and
   * default reason code are the transition table's (`TRANSITIONS`), the ones the backfill derives
   * from the ledger's record of it, so the live event and the derived one are the same event.
   */
  transition(scope: EventScope, name: Transition, extra: Partial<WrapperEvent> = {}): void {
    if (!this.sink) return;
    const spec: TransitionSpec = TRANSITIONS[name];
    const reasonCode = extra.reasonCode ?? spec.reasonCode;
    void this.emit(scope, spec.event, spec.decision, reasonCode ? { ...extra, reasonCode } : extra);
  }

  /**
   * Reports one event. Returns the sink's promise (durable), which only `ctx.audit()` awaits: the
   * ledger records the wrapper's own transitions, so their events are never waited for.
   */
  emit(
    scope: EventScope,
    type: WrapperEventType,
    decision: WrapperEvent['decision'],
    extra: Partial<WrapperEvent> = {},
  ): void | Promise<void> {
    const sink = this.sink;
    if (!sink) return;
    const event: WrapperEvent = {
      type,
      operation: this.operation,
      decision,
      queue: scope.job.queueName,
      attemptsMade: scope.facts.attemptsMade,
      attemptsStarted: scope.facts.attemptsStarted,
      stalledCounter: scope.facts.stalledCounter,
      ...extra,
      // Database time of the transition when the ledger gave one; otherwise the time of emission.
      at: extra.at ?? new Date(),
    };
    // Assigned rather than spread: this runs for every transition of every job.
    if (scope.k) event.key = scope.k;
    if (scope.parentK) event.parentKey = scope.parentK;
    if (scope.stepId) event.stepId = scope.stepId;
    if (scope.job.id) event.jobId = scope.job.id;
    if (scope.taskId) event.taskId = scope.taskId;
    return sink.emit(event);
  }
}

/**
 * Writes what became of an attempt that held the lease, for an operation and its steps alike:
 * completed, failed, released, unknown, or what the reconcile hook found. Every write is fenced
 * by the epoch, asked again while the lease holds ({@link persist}), and reported as an event.
 */
export class OutcomeRecorder {
  constructor(
    readonly s: RunnerSettings<unknown>,
    readonly events: AttemptEvents,
  ) {}

  /**
   * What the ledger records (and BullMQ keeps) of a value, for this and every later attempt:
   * sealed exactly; an operation's result is first checked against its schema and keeps its
   * declared public fields in clear, a step's is sealed whole.
   */
  sealValue(scope: AttemptScope, value: unknown): unknown {
    if (scope.stepId !== undefined) return sealResult(value, [], this.s.keyring, this.placeOf(scope));
    this.s.op.parseResult(value);
    return sealResult(value, this.s.op.publicResult, this.s.keyring, this.placeOf(scope));
  }

  /** Where `scope`'s seals belong: its row's operation (a step's is `operation#step`) and key. */
  placeOf(scope: AttemptScope): ResultPlace {
    return {
      operation: scope.stepId === undefined ? this.s.op.name : `${this.s.op.name}#${scope.stepId}`,
      key: scope.k,
    };
  }

  /**
   * Records the value a run returned. On a stale epoch (another attempt holds the key now) it
   * reports `stale_completion` and rethrows: the next attempt replays what the holder records.
   * A value that cannot be recorded (cannot be sealed, too large, fails the result schema) after
   * its effect ran marks the key unknown, since running it again would double it: the operation
   * fails with that error, unrecoverable; a step throws {@link UnknownOutcomeError}, which its
   * operation meets as an unknown outcome.
   */
  async complete(scope: AttemptScope, epoch: number, value: unknown, signal: SignalSource): Promise<Completed> {
    try {
      const sealed = this.sealValue(scope, value);
      const done = await this.write(scope, 'complete', signal, epoch, sealed);
      this.events.transition(scope, 'completed', { epoch, at: done.at });
      return done;
    } catch (err) {
      // The claim's row is gone: not a refusal of the value; the attempt records it (recordLost).
      if (err instanceof RecordLostError) throw err;
      if (err instanceof StaleEpochError) {
        // The side effect ran but another attempt holds the key now: report, never drop silently.
        this.events.emit(scope, 'stale_completion', 'deny', { epoch, reasonCode: err.code });
        this.s.options.logger?.error(
          { key: scope.k, epoch, currentEpoch: err.details.currentEpoch },
          'completion rejected: stale epoch',
        );
        throw err;
      }
      // Not a refusal of the value: the ledger could not be asked, and the job waits to ask again.
      if (err instanceof LedgerUnreachableError || !isIdempotencyError(err)) throw err;
      await this.markUnknown(scope, epoch, recordedError(err, this.s.keyring, this.placeOf(scope)), signal);
      throw scope.stepId === undefined ? unrecoverable(err) : new UnknownOutcomeError({ key: scope.k, epoch });
    }
  }

  /** Writes what a processor's (or a step's) error means: released, failed, or unknown. */
  async recordError(
    scope: AttemptScope,
    epoch: number,
    err: unknown,
    cls: Exclude<ErrorClass, 'reconcile'>,
    signal: SignalSource,
  ): Promise<void> {
    const error = recordedError(err, this.s.keyring, this.placeOf(scope));
    if (cls === 'unknown') return this.markUnknown(scope, epoch, error, signal);
    const mode = cls === 'terminal' ? 'terminal' : 'retryable';
    const written = await this.writeError(scope, epoch, error, cls, mode, signal);
    if (!written) return;
    this.events.transition(scope, cls === 'terminal' ? 'failed' : cls === 'wait' ? 'released' : 'failed_retryable', {
      epoch,
      at: written.at,
      reasonCode: error.code,
    });
  }

  /**
   * The failure or release of {@link recordError}. Undefined when the claim's row was lost: the
   * attempt committed nothing, so there is nothing to keep the key from (the next claim finds it
   * absent and runs, which is what a release would have allowed); logged, and counted by the
   * ledger (`lostRecords`).
   */
  private async writeError(
    scope: AttemptScope,
    epoch: number,
    error: RecordedError,
    cls: Exclude<ErrorClass, 'reconcile' | 'unknown'>,
    mode: 'terminal' | 'retryable',
    signal: SignalSource,
  ): Promise<{ at: Date } | undefined> {
    const { ledger } = this.s.options;
    try {
      return cls === 'wait'
        ? await this.persist(
            'release',
            signal,
            () => ledger.release(scope.k, epoch, error.code),
            landedAs(scope.k, epoch, 'released'),
          )
        : await this.persist(
            'fail',
            signal,
            () => ledger.fail(scope.k, epoch, error, mode),
            landedAs(scope.k, epoch, mode === 'terminal' ? 'failed' : 'released'),
          );
    } catch (err) {
      if (!(err instanceof RecordLostError)) throw err;
      this.s.options.logger?.error(
        { key: scope.k, epoch, code: err.code, currentEpoch: err.details.currentEpoch },
        'the record of the claim was lost; the attempt committed nothing, so nothing is written back',
      );
      return undefined;
    }
  }

  /**
   * The attempt holding `epoch` found its claim's row gone, or at a lower epoch (a restore, a
   * promoted asynchronous standby): its outcome cannot be recorded where it was claimed, and a
   * retry that claimed the key afresh would run the effect again. What happens depends on the
   * operation's downstream:
   * - `none`: the row is written back `unknown` at this epoch with `IDEMPOTENCY_RECORD_LOST`
   *   (transition `record_lost`, audited as the `unknown` event); the job fails unrecoverably, and
   *   a retry or a duplicate job meets `unknown` and does not run until an operator resolves it.
   * - `idempotent` and `reconcile`: nothing is written back; a `stale_completion` event with the
   *   code is reported and the job fails retryably with {@link RecordLostError}. The retry claims
   *   the key afresh and runs again, sending the same `ctx.idempotencyKey`: the downstream's
   *   deduplication by that key is what keeps the effect single (a `reconcile` downstream must
   *   accept the key as well to be safe here; otherwise declare it `none`).
   * Should another attempt have written the row back at this epoch or above meanwhile, the job
   * fails retryably and its retry meets that row.
   */
  async recordLost(
    scope: AttemptScope,
    claim: ClaimOptions,
    epoch: number,
    err: RecordLostError,
    signal: SignalSource,
  ): Promise<never> {
    this.s.options.logger?.error(
      { key: scope.k, epoch, code: err.code, currentEpoch: err.details.currentEpoch, downstream: claim.downstream },
      'the record of a held claim was lost (restored or failed-over database?)',
    );
    if (claim.downstream === 'none') {
      const written = await this.persist('recordLost', signal, () =>
        this.s.options.ledger.recordLost(claim, epoch, recordedError(err, this.s.keyring, this.placeOf(scope))),
      );
      if (written) {
        this.events.transition(scope, 'record_lost', { epoch, at: written.at, reasonCode: err.code });
        throw unrecoverable(err);
      }
    }
    this.events.emit(scope, 'stale_completion', 'deny', { epoch, reasonCode: err.code });
    throw err;
  }

  /** Marks the key unknown: its effect may have committed and cannot be checked; an operator decides. */
  async markUnknown(scope: AttemptScope, epoch: number, error: RecordedError, signal: SignalSource): Promise<void> {
    const { at } = await this.persist(
      'markUnknown',
      signal,
      () => this.s.options.ledger.markUnknown(scope.k, epoch, error),
      landedAs(scope.k, epoch, 'unknown'),
    );
    this.events.transition(scope, 'marked_unknown', { epoch, at, reasonCode: error.code });
  }

  /**
   * Asks the reconcile hook what an ambiguous attempt did. Committed: records the result found.
   * Not committed: returns undefined (the caller runs again or releases). Cannot tell: marks
   * unknown and throws.
   */
  async reconcile(
    scope: AttemptScope,
    input: unknown,
    epoch: number,
    signal: AbortSignal,
  ): Promise<{ result: unknown } | undefined> {
    const hook = this.s.op.definition.reconcile;
    if (!hook) return undefined;
    const found = await hook({ input, key: scope.key, idempotencyKey: scope.k, signal });
    if (found.committed === true) {
      const done = await this.write(scope, 'complete', signal, epoch, this.sealValue(scope, found.result));
      this.events.emit(scope, 'reconciled', 'allow', { epoch, at: done.at, reasonCode: 'RECONCILED_COMMITTED' });
      return { result: done.result };
    }
    if (found.committed === false) {
      this.events.emit(scope, 'reconciled', 'allow', { epoch, reasonCode: 'RECONCILED_NOT_COMMITTED' });
      return undefined;
    }
    await this.markUnknown(
      scope,
      epoch,
      { code: 'IDEMPOTENCY_UNKNOWN_OUTCOME', message: 'reconcile could not tell' },
      signal,
    );
    throw unrecoverable(new UnknownOutcomeError({ key: scope.k, epoch }));
  }

  /** A fenced write asked again while the lease holds; see {@link persist}. */
  persist<T>(what: string, signal: SignalSource, write: () => Promise<T>, landed?: Landed<T>): Promise<T> {
    return persist(this.s.options.ledger, this.s.op.leaseMs, what, signal, write, landed);
  }

  /** The ledger's completion of `scope`'s key under `epoch`. */
  private write(scope: AttemptScope, what: string, signal: SignalSource, epoch: number, sealed: unknown) {
    return this.persist(
      scope.stepId === undefined ? what : `step ${what}`,
      signal,
      () => this.s.options.ledger.complete(scope.k, epoch, sealed),
      landedCompletion(scope.k, epoch),
    );
  }
}

/**
 * A ledger write or claim that could not reach Postgres. Internal: the attempt runner turns it
 * into a delayed job (no BullMQ attempt used) and never hands it to BullMQ; `cause` is the
 * driver's error.
 */
export class LedgerUnreachableError extends IdempotencyError<typeof ERROR_CODES.ledgerUnreachable> {
  readonly what: string;

  constructor(what: string, cause: unknown) {
    super(ERROR_CODES.ledgerUnreachable, `the ledger could not be reached (${what})`, { what }, { cause });
    this.what = what;
  }
}

/**
 * The {@link LedgerUnreachableError} in `err`'s cause chain (a processor may wrap a step's). Never
 * throws: a Proxy whose traps throw, or a `cause` getter that does, has none.
 */
export function ledgerUnreachable(err: unknown): LedgerUnreachableError | undefined {
  try {
    for (let e: unknown = err, depth = 0; !types.isProxy(e) && e instanceof Error && depth < 5; e = e.cause, depth++) {
      if (e instanceof LedgerUnreachableError) return e;
    }
  } catch {
    // not ours: ours are plain errors
  }
  return undefined;
}

/** The process's one backoff for the ledger: every runner of this process shares it. */
export const ledgerBackoff = new Backoff();

const signalOf = (source: SignalSource): AbortSignal => (source instanceof AbortSignal ? source : source.signal);

/** How a write that landed although its answer was lost is recognised, and what it returns then. */
export type Landed<T> = { key: string; epoch: number; status: LedgerStatus; value: (rec: LedgerRecord) => T };

/**
 * A ledger write made while the attempt holds its lease, asked again with backoff while the
 * lease holds (`source`'s signal fires when the keeper cannot keep it) and for at most two leases; then a
 * {@link LedgerUnreachableError}, and the job is deferred. A write that landed although its
 * answer was lost meets its own state on the retry: `landed` reads it from the record.
 */
export async function persist<T>(
  ledger: AttemptLedger,
  leaseMs: number,
  what: string,
  source: SignalSource,
  write: () => Promise<T>,
  landed?: Landed<T>,
): Promise<T> {
  const deadline = performance.now() + 2 * leaseMs;
  let failedBefore = false;
  for (;;) {
    try {
      const out = await write();
      ledgerBackoff.reset();
      return out;
    } catch (err) {
      if (failedBefore && landed && err instanceof IllegalTransitionError) {
        const rec = await ledger.get(landed.key).catch((e: unknown) => {
          if (isInfraError(e)) throw new LedgerUnreachableError(what, e);
          throw e;
        });
        if (rec && rec.epoch === landed.epoch && rec.status === landed.status) return landed.value(rec);
      }
      if (!isInfraError(err)) throw err;
      failedBefore = true;
      const signal = signalOf(source);
      const left = deadline - performance.now();
      if (signal.aborted || left <= 0) throw new LedgerUnreachableError(what, err);
      await pause(Math.min(left, Math.max(25, leaseMs / 4), ledgerBackoff.next()), signal);
    }
  }
}

// What a landed write returns, read from its record: functions made once, not per write (every
// completion builds its `Landed`, and a function made per call costs an allocation each time).
const completionOf = (rec: LedgerRecord): { at: Date; result: unknown } => ({
  at: rec.completedAt ?? rec.updatedAt,
  result: rec.result,
});
const updatedAtOf = (rec: LedgerRecord): { at: Date } => ({ at: rec.updatedAt });

/** A completion that landed although its answer was lost: its receipt, read from the record. */
export function landedCompletion(key: string, epoch: number): Landed<{ at: Date; result: unknown }> {
  return { key, epoch, status: 'completed', value: completionOf };
}

/** A fail, release or markUnknown that landed although its answer was lost. */
export function landedAs(key: string, epoch: number, status: LedgerStatus): Landed<{ at: Date }> {
  return { key, epoch, status, value: updatedAtOf };
}
