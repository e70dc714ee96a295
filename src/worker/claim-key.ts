import { SealError } from '../errors/errors.js';
import { ERROR_CODES } from '../errors/idempotency-error.js';
import { fingerprint } from '../fingerprint/fingerprint.js';
import { fingerprintKeyId } from '../fingerprint/keyed-fingerprint.js';
import type { ClaimOptions, ClaimOutcome } from '../ledger/types.js';
import { unrecoverable } from '../sealing/bullmq-signals.js';
import type { AttemptScope } from './attempt-scope.js';
import type { RunnerSettings } from './runner-settings.js';

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
  if (scope.job.id) options.jobId = s.ids('jobId', scope.job.id, { operationId: scope.parentK ?? scope.k });
  if (scope.taskId) options.taskId = s.ids('taskId', scope.taskId);
  if (scope.stepId) options.stepId = s.ids('stepId', scope.stepId);
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
