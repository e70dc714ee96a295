import type { Queue } from 'bullmq';
import type pg from 'pg';
import { runBackfill } from '../src/entries/audit.js';

/** Waits until the audit writer has taken every batch of the audit queue (nothing waiting or active). */
export async function auditWritten(queue: Queue, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let quiet = 0;
  while (quiet < 2) {
    const counts = await queue.getJobCounts('wait', 'active', 'delayed', 'prioritized');
    quiet = Object.values(counts).every((n) => n === 0) ? quiet + 1 : 0;
    if (Date.now() > deadline) throw new Error(`the audit writer did not take every batch (${JSON.stringify(counts)})`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

export type BackfillShown = {
  /** Audit rows deleted on purpose: every `completed` and `unknown` transition. */
  deleted: number;
  rowsScanned: number;
  eventsEnqueued: number;
  /** Rows the writer stored again after the backfill. */
  restored: number;
  /** Whether the restored rows are exactly the deleted ones (by event id). */
  sameIds: boolean;
};

/**
 * Loses part of the trail on purpose, then has the backfill derive it again from the ledger: the
 * events keep their ids, so what was there already is refused as a duplicate and what was lost
 * comes back once.
 */
export async function showBackfill(pool: pg.Pool, schema: string, auditQueue: Queue): Promise<BackfillShown> {
  const ids = async () =>
    new Set(
      (await pool.query<{ event_id: string }>(`select event_id from ${schema}.audit_events`)).rows.map(
        (r) => r.event_id,
      ),
    );
  const deleted = await pool.query<{ event_id: string }>(
    `delete from ${schema}.audit_events where action in ('idempotency.completed', 'idempotency.unknown') returning event_id`,
  );
  const before = await ids();
  const progress = await runBackfill({ pool, schema, auditQueue, name: 'demo' });
  await auditWritten(auditQueue);
  const after = await ids();
  const restored = [...after].filter((id) => !before.has(id));
  const lost = new Set(deleted.rows.map((r) => r.event_id));
  return {
    deleted: lost.size,
    rowsScanned: progress.rowsScanned,
    eventsEnqueued: progress.eventsEnqueued,
    restored: restored.length,
    sameIds: restored.length === lost.size && restored.every((id) => lost.has(id)),
  };
}
