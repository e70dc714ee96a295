import { listRecords } from '../ledger/list-records.js';
import type { PostgresLedger } from '../ledger/postgres-ledger.js';
import { TRANSITION_NAMES, TRANSITIONS } from '../ledger/transitions.js';
import type { LedgerRecord } from '../ledger/types.js';
import type { AuditEvent } from './audit-event.js';
import type { AuditStore } from './audit-store.js';
import { DERIVED_VIA } from './derive.js';
import { renderConfirmation, type TimelineConfirmation, timelineConfirmations } from './timeline-confirmations.js';

/** One attempt of an operation (or step), as the events tell it. */
export type TimelineAttempt = {
  operationId: string;
  stepId?: string;
  epoch: number;
  jobId?: string;
  attemptsStarted?: number;
  start: 'claimed' | 'takeover';
  end?: string;
  decisions: { action: string; decision: AuditEvent['decision']; reasonCode?: string }[];
};

/**
 * A job that found the operation in progress under another attempt's lease and waited (polling
 * as a delayed job): one entry per job and holder's epoch, however many polls. `since` is its
 * first stored poll; `until` the job's next event on that operation (its claim, takeover or
 * replay), when there is one.
 */
export type TimelineWait = {
  operationId: string;
  stepId?: string;
  /** The epoch of the attempt that held the lease. */
  epoch: number;
  jobId?: string;
  since: string;
  until?: string;
};

/** The reconstructed story of a task or operation. */
export type Timeline = {
  /** Ordered, one per event id (the earliest when the same id is given more than once). */
  events: AuditEvent[];
  attempts: TimelineAttempt[];
  waits: TimelineWait[];
  /** Confirmations (`ctx.confirm`): each request, its wait and its answer. */
  confirmations: TimelineConfirmation[];
  replays: number;
  takeovers: number;
  finalStates: { key: string; status: string; epoch: number; stepId: string | null }[];
};

/**
 * Events that end an attempt: the outcomes of the transition table, and what the wrapper reports
 * of an attempt that could not record its own (others, like another job finding it in progress, do not).
 */
const ENDINGS: ReadonlySet<string> = new Set([
  ...TRANSITION_NAMES.filter((t) => TRANSITIONS[t].endsAttempt).map((t) => TRANSITIONS[t].event),
  'stale_completion',
  'reconciled',
]);

/** Events that start an attempt (a lease given to it): those of the table's transitions that do. */
const STARTS: ReadonlySet<string> = new Set(
  TRANSITION_NAMES.filter((t) => TRANSITIONS[t].startsAttempt).map((t) => TRANSITIONS[t].event),
);

/** Builds the story from events (any arrival order) and the current ledger rows. */
export function buildTimeline(events: AuditEvent[], records: LedgerRecord[]): Timeline {
  const ordered = [...events].sort(
    (a, b) =>
      a.createdAt.localeCompare(b.createdAt) ||
      (a.epoch ?? 0) - (b.epoch ?? 0) ||
      (a.seq ?? 0) - (b.seq ?? 0) ||
      a.eventId.localeCompare(b.eventId),
  );
  // One entry per event id, as the store keeps one row per id: the earliest comes first.
  const seen = new Set<string>();
  for (let i = 0; i < ordered.length; i++) {
    const id = (ordered[i] as AuditEvent).eventId;
    if (seen.has(id)) ordered.splice(i--, 1);
    else seen.add(id);
  }
  const attempts = new Map<string, TimelineAttempt>();
  /** Attempts whose end was inferred from a later epoch's fence, not reported by the attempt. */
  const inferredEnd = new WeakSet<TimelineAttempt>();
  const waits: TimelineWait[] = [];
  /** Open waits by job and operation: the job's next event there ends it. */
  const waiting = new Map<string, TimelineWait>();
  /** The ledger key of each attempt (an attempt's operationId is its parent's for a step). */
  const attemptKey = new Map<TimelineAttempt, string>();
  let replays = 0;
  let takeovers = 0;
  for (const e of ordered) {
    if (e.resourceType === 'confirmation') continue; // told as confirmations, below
    const type = e.action.startsWith('idempotency.') ? e.action.slice('idempotency.'.length) : 'decision';
    const id = `${e.resourceType === 'idempotency_key' ? e.resourceId : e.operationId}|${e.epoch}`;
    const jobOp = e.jobId === undefined ? undefined : `${e.jobId}|${e.resourceId}`;
    if (jobOp !== undefined && type !== 'in_progress' && e.resourceType === 'idempotency_key') {
      const w = waiting.get(jobOp);
      if (w) {
        w.until = e.createdAt;
        waiting.delete(jobOp);
      }
    }
    if (type === 'in_progress') {
      const w: TimelineWait = { operationId: e.operationId ?? e.resourceId, epoch: e.epoch ?? 0, since: e.createdAt };
      if (e.stepId) w.stepId = e.stepId;
      if (e.jobId) w.jobId = e.jobId;
      waits.push(w);
      if (jobOp !== undefined) waiting.set(jobOp, w);
    } else if (STARTS.has(type)) {
      if (type === 'takeover') takeovers++;
      const at: TimelineAttempt = {
        operationId: e.operationId ?? e.resourceId,
        epoch: e.epoch ?? 0,
        start: type as TimelineAttempt['start'],
        decisions: [],
      };
      if (e.stepId) at.stepId = e.stepId;
      if (e.jobId) at.jobId = e.jobId;
      if (e.attemptsStarted !== undefined) at.attemptsStarted = e.attemptsStarted;
      attempts.set(id, at);
      attemptKey.set(at, e.resourceId);
    } else if (type === 'replayed') {
      replays++;
    } else if (type === 'decision') {
      const at = attempts.get(`${e.operationId}|${e.epoch}`);
      const d: TimelineAttempt['decisions'][number] = { action: e.action, decision: e.decision };
      if (e.reasonCode) d.reasonCode = e.reasonCode;
      at?.decisions.push(d);
    } else if (ENDINGS.has(type)) {
      const at = attempts.get(id);
      // The attempt's own ending is kept over one inferred from a later epoch's fence.
      if (at && (!at.end || inferredEnd.has(at))) {
        at.end = type;
        inferredEnd.delete(at);
      }
    }
    if (SUPERSEDING.has(type) && e.resourceType === 'idempotency_key') {
      // An earlier epoch's attempt that recorded nothing was fenced: its lease ran out (a
      // takeover, or the move to unknown), or an operator invalidated the key.
      for (const at of attempts.values()) {
        if (!at.end && at.epoch < (e.epoch ?? 0) && attemptKey.get(at) === e.resourceId) {
          at.end = type === 'invalidated' ? 'invalidated' : 'lease_lost';
          inferredEnd.add(at);
        }
      }
    }
  }
  return {
    events: ordered,
    attempts: [...attempts.values()],
    waits,
    confirmations: timelineConfirmations(ordered),
    replays,
    takeovers,
    finalStates: records.map((r) => ({ key: r.key, status: r.status, epoch: r.epoch, stepId: r.stepId })),
  };
}

/** Events of transitions that fence an earlier epoch's attempt (see TRANSITIONS' `supersedes`). */
const SUPERSEDING: ReadonlySet<string> = new Set(
  TRANSITION_NAMES.filter((t) => TRANSITIONS[t].supersedes).map((t) => TRANSITIONS[t].event),
);

/** Marks, in {@link renderTimeline}, an event the backfill derived from the ledger. */
export const BACKFILL_MARK = '[backfill]';

/** True for an event the backfill derived from the ledger's record of transitions (not emitted live). */
export function fromBackfill(e: AuditEvent): boolean {
  return (e.details as { via?: unknown } | undefined)?.via === DERIVED_VIA;
}

/** A text rendering for the CLI: one line per event, then the final ledger states. */
export function renderTimeline(t: Timeline): string {
  const lines = t.events.map((e) => {
    const who = `${e.actorType}:${e.actorId}`;
    const where = [
      e.stepId ? `step ${e.stepId}` : '',
      e.epoch ? `epoch ${e.epoch}` : '',
      e.jobId ? `job ${e.jobId}` : '',
    ]
      .filter(Boolean)
      .join(', ');
    const mark = fromBackfill(e) ? `  ${BACKFILL_MARK}` : '';
    return `${e.createdAt}  ${e.action.padEnd(28)} ${e.decision.padEnd(20)} ${e.reasonCode ?? ''}${where ? `  (${where})` : ''}  ${who}${mark}`;
  });
  if (t.events.some(fromBackfill)) {
    lines.push(
      `${BACKFILL_MARK} written by the backfill from the ledger's record of the transition (its live event was not stored)`,
    );
  }
  lines.push(
    '',
    `attempts: ${t.attempts.length}, takeovers: ${t.takeovers}, replays: ${t.replays}, waits: ${t.waits.length}`,
  );
  for (const c of t.confirmations) lines.push(renderConfirmation(c));
  for (const s of t.finalStates) lines.push(`final: ${s.key} ${s.status} (epoch ${s.epoch})`);
  return lines.join('\n');
}

/** The ledger rows of one task a timeline reads at most (beside those its events name). */
const TASK_KEYS_MAX = 1_000;

/**
 * The ordered story of a task (`{ taskId }`) or of one operation (`{ operationKey }`, the
 * bounded key): attempts, takeovers, replays, decisions and the final ledger states.
 *
 * @example
 * const t = await timeline({ taskId: 'task-42' }, { store, ledger });
 * console.log(renderTimeline(t));
 */
export async function timeline(
  query: { taskId: string } | { operationKey: string },
  deps: { store: AuditStore; ledger: PostgresLedger },
): Promise<Timeline> {
  const events = await deps.store.events(query);
  const keys = new Set<string>();
  for (const e of events) if (e.resourceType === 'idempotency_key') keys.add(e.resourceId);
  if ('operationKey' in query) keys.add(query.operationKey);
  else {
    // A key whose resource part is not an identifier's shape (a phone number, a random token) is
    // in its events as its ref: the task's ledger rows name the keys themselves.
    const rows = await listRecords(deps.ledger.pool, deps.ledger.schema, {
      taskIds: deps.store.storedForms(query.taskId),
      limit: TASK_KEYS_MAX,
    });
    for (const r of rows) keys.add(r.key);
  }
  const records: LedgerRecord[] = [];
  for (const k of keys) {
    const r = await deps.ledger.get(k);
    if (r) records.push(r);
  }
  return buildTimeline(events, records);
}
