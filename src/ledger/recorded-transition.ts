import type { LedgerStatus, Transition } from './states.js';
import { transitionSpec } from './transitions.js';

/**
 * One transition of a ledger row as the row records it (`transitions`, migration 0005): written
 * by the statement that made the transition, so it exists whenever the transition does, for
 * every epoch. The audit backfill derives each one's event from it.
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

/** The stored JSON of one transition (short keys, see `ledgerStatements`). */
type StoredTransition = {
  t?: unknown;
  e?: unknown;
  at?: unknown;
  o?: unknown;
  j?: unknown;
  q?: unknown;
  k?: unknown;
  c?: unknown;
  p?: unknown;
  a?: unknown;
  r?: unknown;
};

const OPTIONAL: [keyof StoredTransition, keyof RecordedTransition][] = [
  ['o', 'owner'],
  ['j', 'jobId'],
  ['q', 'queue'],
  ['k', 'taskId'],
  ['c', 'errorCode'],
  ['p', 'previousStatus'],
  ['a', 'actorId'],
  ['r', 'reason'],
];

/**
 * The recorded transitions of a row, oldest first; `null` for a row from before they were
 * recorded. An entry this version does not know (a transition added later) is skipped.
 */
export function parseTransitions(value: unknown): RecordedTransition[] | null {
  if (!Array.isArray(value)) return null;
  const out: RecordedTransition[] = [];
  for (const raw of value as StoredTransition[]) {
    if (typeof raw !== 'object' || raw === null) continue;
    if (typeof raw.t !== 'string' || !transitionSpec(raw.t)) continue;
    const entry: RecordedTransition = {
      transition: raw.t as Transition,
      epoch: Number(raw.e),
      at: new Date(Number(raw.at)),
    };
    for (const [from, to] of OPTIONAL) {
      const v = raw[from];
      if (typeof v === 'string') (entry as Record<string, unknown>)[to] = v;
    }
    out.push(entry);
  }
  return out;
}
