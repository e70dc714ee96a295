import { IdempotencyConflictError, RecordedFailureError, UnknownOutcomeError } from '../errors/errors.js';
import type { IdempotencyError } from '../errors/idempotency-error.js';
import type { ClaimOutcome } from '../ledger/types.js';
import type { AttemptEvents } from './attempt-events.js';
import type { AttemptScope } from './attempt-scope.js';

/** A claim that acquired the lease. */
export type Acquired = Extract<ClaimOutcome, { kind: 'acquired' }>;

/**
 * What an attempt does after its claim, for an operation and a step alike:
 * - `run`: the lease is ours: run the processor (or the step's function);
 * - `replay`: completed before: return the recorded result, run nothing;
 * - `wait`: another attempt holds the lease: the job waits as a delayed job and claims again;
 * - `refuse`: conflict, recorded failure or unknown outcome: nothing runs, `error` says why.
 */
export type ClaimDecision =
  | { kind: 'run'; claim: Acquired }
  | { kind: 'replay'; result: unknown }
  | { kind: 'wait'; retryAfterMs: number }
  | { kind: 'refuse'; error: IdempotencyError };

/**
 * Maps a claim's outcome to what the attempt does next, and reports the transition it made or
 * found by the transition table (the claim that acquired, a takeover that found the holder's
 * lease expired with no idempotent downstream, a recorded failure or unknown outcome), or the
 * refusal or replay it met (no transition: replayed, conflict, in progress).
 */
export function decideClaim(claim: ClaimOutcome, scope: AttemptScope, events: AttemptEvents): ClaimDecision {
  switch (claim.kind) {
    case 'acquired':
      events.transition(scope, claim.transition, { epoch: claim.epoch, at: claim.at });
      return { kind: 'run', claim };
    case 'completed':
      events.emit(scope, 'replayed', 'allow', { epoch: claim.epoch, at: claim.at });
      return { kind: 'replay', result: claim.result };
    case 'conflict': {
      events.emit(scope, 'conflict', 'deny', { reasonCode: 'IDEMPOTENCY_CONFLICT', at: claim.at });
      const { kind: _k, at: _at, ...details } = claim;
      return { kind: 'refuse', error: new IdempotencyConflictError(details) };
    }
    case 'inProgress':
      events.emit(scope, 'in_progress', 'deny', {
        reasonCode: 'IDEMPOTENCY_IN_PROGRESS',
        epoch: claim.epoch,
        at: claim.at,
      });
      return { kind: 'wait', retryAfterMs: claim.retryAfterMs };
    case 'failed':
      events.transition(scope, 'failed', { reasonCode: claim.error.code, epoch: claim.epoch, at: claim.at });
      return { kind: 'refuse', error: new RecordedFailureError({ key: scope.k, error: claim.error }) };
    case 'unknown':
      // This claim moved the expired lease to unknown, or found the key unknown already.
      events.transition(scope, claim.transitioned ? 'takeover_unknown' : 'marked_unknown', {
        ...(claim.error?.code ? { reasonCode: claim.error.code } : {}),
        epoch: claim.epoch,
        at: claim.at,
      });
      return { kind: 'refuse', error: new UnknownOutcomeError({ key: scope.k, epoch: claim.epoch }) };
  }
}
