import { IdempotencyConflictError, RecordedFailureError, SealError, UnknownOutcomeError } from '../errors/errors.js';
import { ERROR_CODES } from '../errors/idempotency-error.js';
import { fingerprint } from '../fingerprint/fingerprint.js';
import { fingerprintKeyId } from '../fingerprint/keyed-fingerprint.js';
import type { ClaimOptions, ClaimOutcome } from '../ledger/types.js';
import { unrecoverable } from '../sealing/bullmq-errors.js';
import { lazyField } from '../shared/lazy-field.js';
import type { AttemptEvents } from './record.js';
import type { AttemptScope, ClaimDecision, RunnerSettings } from './types.js';

// The claim, for an operation and its steps alike: its options built, the ledger asked (once
// more after a keyring rotation), and its outcome mapped to what the attempt does next.

/**
 * The claim of `scope`'s key, for the operation (`operation` is its name) or one of its steps
 * (`<name>#<step>`, with `stepId`): the one place a claim's options are built.
 */
export function claimOptions(
  s: RunnerSettings<unknown>,
  scope: AttemptScope,
  operation: string,
  fp: string,
): ClaimOptions {
  const options: ClaimOptions = {
    key: scope.key,
    operation,
    fingerprint: fp,
    leaseMs: s.op.leaseMs,
    retentionMs: s.op.retentionMs,
    downstream: s.op.downstream,
    owner: s.owner,
    queue: scope.job.queueName,
  };
  // The ids as the audit trail tells them: in clear when they match a format, else their refs.
  // Made when the ledger writes them (a claim that inserts or takes over the row), not for a
  // replay, which the ledger answers from its read: a keyed ref costs an HMAC.
  const { id } = scope.job;
  const { taskId, stepId } = scope;
  if (id) lazyField(options, 'jobId', () => s.ids('jobId', id, { operationId: scope.parentK ?? scope.k }));
  if (taskId) lazyField(options, 'taskId', () => s.ids('taskId', taskId));
  if (stepId) lazyField(options, 'stepId', () => s.ids('stepId', stepId));
  return options;
}

/** A claim's outcome and the fingerprint the attempt goes on with (the stored one after a rotation). */
export type Claimed = { claim: ClaimOutcome; fingerprint: string };

/**
 * Claims a key. With `input` (an operation's claim), a conflict whose stored fingerprint was
 * keyed with another key of the ring (made before a rotation) is checked again with that key:
 * the same input under the same key is no conflict, and the claim goes on with the stored
 * fingerprint. A step's fingerprint derives from the operation's, so it needs no such check.
 */
export async function claimKey(
  s: RunnerSettings<unknown>,
  options: ClaimOptions,
  input?: { value: unknown },
): Promise<Claimed> {
  const claim = await s.options.ledger.claim(options);
  if (claim.kind !== 'conflict' || !input) return { claim, fingerprint: options.fingerprint };
  const stored = claim.storedFingerprint;
  const again = refingerprint(s, input.value, stored);
  if (again !== stored) return { claim, fingerprint: options.fingerprint };
  return { claim: await s.options.ledger.claim({ ...options, fingerprint: stored }), fingerprint: stored };
}

/** `input`'s fingerprint in the form `stored` was made in, or undefined when that is the current form. */
function refingerprint(s: RunnerSettings<unknown>, input: unknown, stored: string): string | undefined {
  const keyId = fingerprintKeyId(stored);
  if (keyId !== undefined && !s.keyring.has(keyId)) {
    // The key that made the stored fingerprint was removed from the ring while its record is
    // still kept: the input cannot be compared, so nothing runs; say why, not "conflict".
    throw unrecoverable(new SealError(ERROR_CODES.sealKeyUnknown, { keyId, purpose: 'fingerprint' }));
  }
  if (keyId !== undefined && keyId !== s.keyring.currentId) return s.op.fingerprintOf(input, s.keyring, keyId);
  // Recorded before fingerprints were keyed: compared in the form it was made in.
  if (keyId === undefined && /^[0-9a-f]{64}$/.test(stored))
    return fingerprint(s.op.name, s.op.definition.effect(input));
  return undefined;
}

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
