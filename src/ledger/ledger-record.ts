import { nullable, type Row } from '../db/row.js';
import { claimingJob, lastClaimIn, leaseHolder, parseTransitions } from './recorded-transition.js';
import type { LedgerRecord, LedgerStatus, RecordedError, Transition } from './types.js';

/**
 * Maps a raw `idempotency_ledger` row (snake_case) to a record. What the row leaves out (migration
 * 0008) is derived: the key's parts from the key when it is not hashed; the last transition, the
 * current epoch's claim and its time, the creation time, and a completed row's job id and queue
 * from the record of transitions; the completion time and the expiry from the last transition's
 * time (and the retention). The columns still hold them for rows written before.
 */
export function toRecord(row: Row): LedgerRecord {
  const key = row.key as string;
  const transitions = parseTransitions(row.transitions, key);
  const parts = row.namespace === null || row.namespace === undefined ? partsOfKey(key) : undefined;
  const lastClaim = lastClaimIn(transitions) ?? null;
  const status = row.status as LedgerStatus;
  const updatedAt = row.updated_at as Date;
  return {
    key,
    namespace: parts ? parts[0] : (row.namespace as string),
    resourceKey: parts ? parts[1] : (row.resource_key as string),
    version: parts ? parts[2] : (row.version as string),
    operation: row.operation as string,
    fingerprint: fingerprintText(row.fingerprint),
    status,
    epoch: row.epoch as number,
    downstream: row.downstream as LedgerRecord['downstream'],
    leaseOwner: leaseHolder(
      { key, status, lease_owner: row.lease_owner, lease_expires_at: row.lease_expires_at },
      lastClaim,
    ),
    leaseExpiresAt: nullable<Date>(row.lease_expires_at),
    retentionMs: Number(row.retention_ms),
    result: row.result ?? null,
    error: nullable<RecordedError>(row.error),
    retryable: nullable<boolean>(row.retryable),
    lastTransition: (nullable<Transition>(row.last_transition) ?? transitions?.at(-1)?.transition) as Transition,
    // A completion clears them and a fresh claim leaves them out (migration 0016): the current
    // claim's entry in the record holds them.
    ...claimingJob({ key, job_id: row.job_id, queue: row.queue }, lastClaim),
    taskId: nullable<string>(row.task_id),
    stepId: nullable<string>(row.step_id),
    createdAt: nullable<Date>(row.created_at) ?? (transitions?.[0]?.at as Date),
    updatedAt,
    claimedAt: lastClaim?.at ?? (row.claimed_at as Date),
    claimTransition: lastClaim?.transition ?? (row.claim_transition as Transition),
    completedAt: nullable<Date>(row.completed_at) ?? (status === 'completed' ? updatedAt : null),
    expiresAt:
      nullable<Date>(row.expires_at) ??
      (TERMINAL_STATES.has(status) ? new Date(updatedAt.getTime() + Number(row.retention_ms)) : null),
    transitions,
  };
}

/** The states in which a row expires after its retention (and may be swept). */
const TERMINAL_STATES: ReadonlySet<LedgerStatus> = new Set(['completed', 'failed', 'released', 'invalidated']);

/**
 * A fingerprint read from the row (bytes, migration 0009): 32 bytes are a SHA-256 hex digest's;
 * others are UTF-8 text, a NUL byte after one of exactly 32 bytes.
 */
function fingerprintText(value: unknown): string {
  if (typeof value === 'string') return value;
  const bytes = value as Buffer;
  if (bytes.length === 32) return bytes.toString('hex');
  const end = bytes.at(-1) === 0 ? bytes.length - 1 : bytes.length;
  return bytes.subarray(0, end).toString('utf8');
}

/** The parts of a key that is not hashed: its canonical string's percent-encoded parts. */
function partsOfKey(key: string): [string, string, string] {
  const [namespace = '', resourceKey = '', version = ''] = key.split(':').map((p) => decodeURIComponent(p));
  return [namespace, resourceKey, version];
}
