import { StaleEpochError, UnknownOutcomeError } from '../errors/errors.js';
import { bullmqSignal, unrecoverable } from '../sealing/bullmq-signals.js';
import { recordedError } from '../sealing/sealed-error.js';
import type { AttemptScope } from './attempt-scope.js';
import { classifyError } from './classify.js';
import { asRecordedFailure } from './error-record.js';
import { ledgerUnreachable } from './ledger-unreachable.js';
import type { OutcomeRecorder } from './outcome-recorder.js';

/**
 * What an operation's processor error means ({@link classifyError}), recorded, then handed to
 * BullMQ: BullMQ's own signals and retryable errors as they are; a terminal error as an
 * unrecoverable {@link RecordedFailureError} (or the library error it was); an unknown outcome
 * as an unrecoverable {@link UnknownOutcomeError}. Returns only when the reconcile hook found the
 * effect committed: its recorded result.
 */
export async function settleProcessorError(
  recorder: OutcomeRecorder,
  scope: AttemptScope,
  input: unknown,
  epoch: number,
  err: unknown,
  signal: AbortSignal,
): Promise<unknown> {
  // A step that could not reach the ledger (the processor rethrew or wrapped its error): the
  // job waits and runs again; its steps' records tell the next attempt what ran.
  const unreachable = ledgerUnreachable(err);
  if (unreachable) throw unreachable;
  const cls = classifyError(err, recorder.s.op.downstream);
  try {
    if (cls === 'reconcile') {
      const settled = await recorder.reconcile(scope, input, epoch, signal);
      if (settled) return settled.result;
      await recorder.recordError(scope, epoch, err, 'retryable', signal); // not committed: BullMQ retries
      throw err;
    }
    await recorder.recordError(scope, epoch, err, cls, signal);
  } catch (thrown) {
    if (thrown instanceof StaleEpochError) {
      recorder.events.emit(scope, 'stale_completion', 'deny', { epoch, reasonCode: thrown.code });
      throw err; // fenced: another attempt owns the key; BullMQ retries and replays its outcome
    }
    throw thrown;
  }
  if (cls === 'wait' || cls === 'retryable') throw err;
  // BullMQ gets the library's error; `originalError()` gives the processor's back, and the
  // stack BullMQ keeps carries the processor's error sealed.
  const recorded = recordedError(err, recorder.s.keyring, recorder.placeOf(scope));
  const stands = { original: err, ...(recorded.sealed ? { sealed: recorded.sealed } : {}) };
  if (cls === 'terminal') {
    throw bullmqSignal(err) === 'unrecoverable'
      ? err
      : unrecoverable(asRecordedFailure(err, scope.k, recorded), stands);
  }
  throw unrecoverable(isUnknownOutcome(err) ? err : new UnknownOutcomeError({ key: scope.k, epoch }), stands);
}

/** `instanceof` that a Proxy whose traps throw answers with false. */
function isUnknownOutcome(err: unknown): err is UnknownOutcomeError {
  try {
    return err instanceof UnknownOutcomeError;
  } catch {
    return false;
  }
}
