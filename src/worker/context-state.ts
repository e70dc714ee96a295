import type { IdempotencyInProgressError } from '../errors/errors.js';
import type { AttemptScope } from './attempt-scope.js';
import type { Completed } from './outcome-recorder.js';

/** What an attempt learns from its processor's use of the context, read once the processor settles. */
export type ContextState = {
  /** `ctx.tx` committed: its value is the operation's result, whatever the processor does next. */
  recorded: Completed | undefined;
  /** `ctx.tx` could not reach the database: its writes and its completion did not commit together. */
  txUnreachable: unknown;
  /** A step found its key held by another attempt: the job waits, then runs again. */
  held: { scope: AttemptScope; error: IdempotencyInProgressError; retryAfterMs: number } | undefined;
  /** Tool decisions reported so far (`ctx.audit()`), for their order. */
  decisions: number;
};

/** The state of an attempt whose processor has not used its context yet. */
export function newContextState(): ContextState {
  return { recorded: undefined, txUnreachable: undefined, held: undefined, decisions: 0 };
}
