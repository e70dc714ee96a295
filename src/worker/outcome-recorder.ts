import { StaleEpochError, UnknownOutcomeError } from '../errors/errors.js';
import { isIdempotencyError } from '../errors/idempotency-error.js';
import type { RecordedError } from '../ledger/types.js';
import { unrecoverable } from '../sealing/bullmq-signals.js';
import { recordedError } from '../sealing/sealed-error.js';
import { sealResult } from '../sealing/sealed-result.js';
import type { AttemptEvents } from './attempt-events.js';
import type { AttemptScope } from './attempt-scope.js';
import type { ErrorClass } from './classify.js';
import { LedgerUnreachableError } from './infra-error.js';
import { type Landed, landedAs, landedCompletion, persist, type SignalSource } from './persist.js';
import type { RunnerSettings } from './runner-settings.js';

/** A completion's receipt: when it took effect (database time) and the result as recorded. */
export type Completed = { at: Date; result: unknown };

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
    if (scope.stepId !== undefined) return sealResult(value, [], this.s.keyring);
    this.s.op.parseResult(value);
    return sealResult(value, this.s.op.publicResult, this.s.keyring);
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
      await this.markUnknown(scope, epoch, recordedError(err, this.s.keyring), signal);
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
    const { ledger } = this.s.options;
    const error = recordedError(err, this.s.keyring);
    if (cls === 'unknown') return this.markUnknown(scope, epoch, error, signal);
    const mode = cls === 'terminal' ? 'terminal' : 'retryable';
    const { at } =
      cls === 'wait'
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
    this.events.transition(scope, cls === 'terminal' ? 'failed' : cls === 'wait' ? 'released' : 'failed_retryable', {
      epoch,
      at,
      reasonCode: error.code,
    });
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
