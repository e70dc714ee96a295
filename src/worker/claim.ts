import { IdempotencyConflictError, RecordedFailureError, SealError, UnknownOutcomeError } from '../errors/errors.js';
import { ERROR_CODES } from '../errors/idempotency-error.js';
import { fingerprint } from '../fingerprint/fingerprint.js';
import { fingerprintKeyId } from '../fingerprint/keyed-fingerprint.js';
import type { ClaimOptions, ClaimOutcome } from '../ledger/types.js';
import { unrecoverable } from '../sealing/bullmq-errors.js';
import type { AttemptEvents } from './record.js';
import type { AttemptScope, ClaimDecision, RunnerSettings } from './types.js';

// The claim, for an operation and its steps alike: its options built, the ledger asked (once
// more after a keyring rotation), and its outcome mapped to what the attempt does next.

/**
 * A claim's options as the wrapper makes them. The ids the ledger stores (job, task, step: in clear
 * when they match a format, else their refs) are made when first read, which the ledger does when
 * a claim statement writes them (a claim that inserts or takes over the row), not for a replay,
 * which its read answers: a keyed ref costs an HMAC, and the job id's check against its key a
 * hash. Getters of the class rather than accessors defined on each object: `Object.defineProperty`
 * cost about 2 µs a claim, more than the rest of its options. A spread copies own properties
 * only and would lose the ids: {@link withFingerprint} makes the same claim with another fingerprint.
 */
export class AttemptClaim implements ClaimOptions {
  readonly key: ClaimOptions['key'];
  readonly operation: string;
  readonly fingerprint: string;
  readonly leaseMs: number;
  readonly retentionMs: number;
  readonly downstream: ClaimOptions['downstream'];
  readonly owner: string;
  readonly queue: string;
  // Private: what the ids are made from, not options of the claim (a spread or a log shows none of it).
  readonly #s: RunnerSettings<unknown>;
  readonly #scope: AttemptScope;
  /** Each id as made (null: the attempt has none), undefined until first read. */
  readonly #ids: { jobId?: string | null; taskId?: string | null; stepId?: string | null };

  constructor(
    s: RunnerSettings<unknown>,
    scope: AttemptScope,
    operation: string,
    fp: string,
    ids: { jobId?: string | null; taskId?: string | null; stepId?: string | null } = {},
  ) {
    this.key = scope.key;
    this.operation = operation;
    this.fingerprint = fp;
    this.leaseMs = s.op.leaseMs;
    this.retentionMs = s.op.retentionMs;
    this.downstream = s.op.downstream;
    this.owner = s.owner;
    this.queue = scope.job.queueName;
    this.#s = s;
    this.#scope = scope;
    this.#ids = ids;
  }

  /** The job id, in clear when it is the library's id of the key (the operation's, for a step), else its ref. */
  get jobId(): string | undefined {
    const { job, parentK, k } = this.#scope;
    return this.#made('jobId', job.id, { operationId: parentK ?? k });
  }

  get taskId(): string | undefined {
    return this.#made('taskId', this.#scope.taskId);
  }

  get stepId(): string | undefined {
    return this.#made('stepId', this.#scope.stepId);
  }

  /** The same claim with fingerprint `fp`, its ids made once for both. */
  withFingerprint(fp: string): AttemptClaim {
    const ids = { jobId: this.jobId ?? null, taskId: this.taskId ?? null, stepId: this.stepId ?? null };
    return new AttemptClaim(this.#s, this.#scope, this.operation, fp, ids);
  }

  /** `field`'s id as the audit trail tells it, made on its first read. */
  #made(
    field: 'jobId' | 'taskId' | 'stepId',
    value: string | undefined,
    context?: { operationId: string },
  ): string | undefined {
    let made = this.#ids[field];
    if (made === undefined) {
      made = value ? this.#s.ids(field, value, context) : null;
      this.#ids[field] = made;
    }
    return made ?? undefined;
  }
}

/**
 * The claim of `scope`'s key, for the operation (`operation` is its name) or one of its steps
 * (`<name>#<step>`, with `stepId`): the one place a claim's options are built.
 */
export function claimOptions(
  s: RunnerSettings<unknown>,
  scope: AttemptScope,
  operation: string,
  fp: string,
): AttemptClaim {
  return new AttemptClaim(s, scope, operation, fp);
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
  options: AttemptClaim,
  input?: { value: unknown },
): Promise<Claimed> {
  const claim = await s.options.ledger.claim(options);
  if (claim.kind !== 'conflict' || !input) return { claim, fingerprint: options.fingerprint };
  const stored = claim.storedFingerprint;
  const again = refingerprint(s, input.value, stored);
  if (again !== stored) return { claim, fingerprint: options.fingerprint };
  return { claim: await s.options.ledger.claim(options.withFingerprint(stored)), fingerprint: stored };
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
