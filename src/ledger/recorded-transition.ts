import { jobIdOfKey } from '../keys/job-id.js';
import type { LedgerStatus, Transition } from './states.js';
import { TRANSITIONS, transitionSpec } from './transitions.js';

/**
 * One transition of a ledger row as the row records it (`transitions`, migrations 0005 and 0008):
 * written by the statement that made the transition, so it exists whenever the transition does,
 * for every epoch. The audit backfill derives each one's event from it.
 */
export type RecordedTransition = {
  transition: Transition;
  epoch: number;
  /** Database time of the transition, in whole milliseconds (the time the statement returned). */
  at: Date;
  /** The attempt that claimed: lease owner, job, queue, task. */
  owner?: string;
  jobId?: string;
  queue?: string;
  taskId?: string;
  /** The error code the transition recorded. */
  errorCode?: string;
  /** An operator's transition: the status before, who and why. */
  previousStatus?: LedgerStatus;
  actorId?: string;
  reason?: string;
};

/**
 * The stored code of each transition (migration 0008). Stored in every row: a code is never
 * changed or reused; a new transition takes the next number.
 */
export const TRANSITION_CODES: Readonly<Record<Transition, number>> = {
  claimed: 0,
  takeover: 1,
  takeover_unknown: 2,
  reclaimed: 3,
  reclaimed_after_expiry: 4,
  reclaimed_after_invalidation: 5,
  completed: 6,
  failed: 7,
  failed_retryable: 8,
  released: 9,
  marked_unknown: 10,
  invalidated: 11,
  resolved_committed: 12,
  resolved_not_committed: 13,
  record_lost: 14,
};

const BY_CODE = new Map<number, Transition>(
  Object.entries(TRANSITION_CODES).map(([name, code]) => [code, name as Transition]),
);

/**
 * The optional facts of an entry, by their one-letter stored names: `o` owner, `j` job id, `q`
 * queue, `k` task id, `c` error code, `p` the status before (operators), `a` actor, `r` reason.
 */
export const OPTIONAL_FACTS = [
  ['o', 'owner'],
  ['j', 'jobId'],
  ['q', 'queue'],
  ['k', 'taskId'],
  ['c', 'errorCode'],
  ['p', 'previousStatus'],
  ['a', 'actorId'],
  ['r', 'reason'],
] as const satisfies readonly (readonly [string, keyof RecordedTransition])[];

/**
 * The job id a claim's entry stores as `"j":1`: the one BullMQ jobs of the library carry, derived
 * from the key (`jobIdOfKey`: `idem_` and the key's SHA-256 in base64url, 48 characters). A claim
 * whose job id is that one stores the marker instead (migration 0016): 47 bytes less in every row
 * and in the WAL of its insert and of every later transition that rewrites the record. Any other
 * job id is stored as it is.
 */
export const DERIVED_JOB_ID = 1;

/**
 * The recorded transitions of a row, oldest first; `null` for a row from before they were
 * recorded. The stored form (migration 0008) is text: JSON arrays joined by commas, one per
 * transition, `[code, epoch, ms]` or `[code, epoch, ms, {facts}]`, where `ms` is the database time
 * in whole milliseconds since 1970 for the first entry and the milliseconds since the first
 * entry for the others. An entry whose code this version does not know (a transition added
 * later) is skipped.
 */
export function parseTransitions(value: unknown, key?: string): RecordedTransition[] | null {
  if (typeof value !== 'string') return null;
  const entries = JSON.parse(`[${value}]`) as unknown[];
  const out: RecordedTransition[] = [];
  let base = 0;
  entries.forEach((raw, i) => {
    if (!Array.isArray(raw)) return;
    const [code, epoch, ms, facts] = raw as [unknown, unknown, unknown, unknown];
    const at = i === 0 ? Number(ms) : base + Number(ms);
    if (i === 0) base = at;
    const transition = BY_CODE.get(Number(code));
    if (!transition || !transitionSpec(transition)) return;
    const entry: RecordedTransition = { transition, epoch: Number(epoch), at: new Date(at) };
    if (typeof facts === 'object' && facts !== null) {
      for (const [from, to] of OPTIONAL_FACTS) {
        const v = (facts as Record<string, unknown>)[from];
        if (typeof v === 'string') (entry as Record<string, unknown>)[to] = v;
        else if (from === 'j' && v === DERIVED_JOB_ID && key !== undefined) entry.jobId = jobIdOfKey(key);
      }
    }
    out.push(entry);
  });
  return out;
}

/** The entry of the claim that made a row's current epoch: the last claim in its record. */
export const lastClaimIn = (transitions: readonly RecordedTransition[] | null): RecordedTransition | undefined =>
  transitions?.findLast((t) => TRANSITIONS[t.transition].by === 'claim');

type RowFacts = { key: string; transitions?: unknown };

/** `claim` as given (already read from the row's record), else read from the row's record. */
const claimOf = (row: RowFacts, claim: RecordedTransition | null | undefined) =>
  claim === undefined ? lastClaimIn(parseTransitions(row.transitions, row.key)) : (claim ?? undefined);

/**
 * The job id and queue of the attempt that made the current epoch's claim: the columns of a row
 * that stores them (written before migration 0016), else the last claim's entry in the record
 * of transitions of the row with key `key` (`claim`, when the caller has read it already).
 */
export function claimingJob(
  row: RowFacts & { job_id?: unknown; queue?: unknown },
  claim?: RecordedTransition | null,
): { jobId: string | null; queue: string | null } {
  const jobId = typeof row.job_id === 'string' ? row.job_id : null;
  const queue = typeof row.queue === 'string' ? row.queue : null;
  if (jobId !== null && queue !== null) return { jobId, queue };
  const c = claimOf(row, claim);
  return { jobId: jobId ?? c?.jobId ?? null, queue: queue ?? c?.queue ?? null };
}

/**
 * The owner of a locked row's lease: its column when the row stores it (a claim before migration
 * 0016, or a takeover), else the current claim's entry in the record of transitions (`o`), which
 * a fresh claim stores it in alone (`claim`, when the caller has read it already). Null when no
 * lease is held.
 */
export function leaseHolder(
  row: RowFacts & { status?: unknown; lease_owner?: unknown; lease_expires_at?: unknown },
  claim?: RecordedTransition | null,
): string | null {
  if (typeof row.lease_owner === 'string') return row.lease_owner;
  if (row.status !== 'locked' || row.lease_expires_at === null || row.lease_expires_at === undefined) return null;
  return claimOf(row, claim)?.owner ?? null;
}
