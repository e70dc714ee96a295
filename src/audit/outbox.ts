import type pg from 'pg';
import { checkSchema } from '../db/connection.js';
import { storable, storableText } from '../db/storable.js';
import type { AuditEvent } from './audit-event.js';

/**
 * The Postgres outbox of the audit trail (`audit_outbox`): batches the emitter could not enqueue
 * (Redis down, or the emitter over capacity) wait here until the backfill drains them.
 */
const outboxTable = (schema: string) => `${checkSchema(schema)}.audit_outbox`;

/** Longest reason kept with a batch, in characters. */
const MAX_REASON_LENGTH = 500;

/**
 * Writes one batch to the outbox. The events are made storable first (one NUL or lone surrogate
 * in one event would otherwise lose the whole batch: the outbox is the last place it can go).
 */
export async function writeOutboxBatch(
  pool: pg.Pool,
  schema: string,
  events: readonly AuditEvent[],
  reason: string,
): Promise<void> {
  await pool.query(`insert into ${outboxTable(schema)} (events, reason) values ($1::jsonb, $2)`, [
    JSON.stringify(storable(events)),
    storableText(reason.slice(0, MAX_REASON_LENGTH)),
  ]);
}

/**
 * Hands the outbox's batches, 50 at a time, to `deliver`; a batch leaves the outbox only once
 * `deliver` has resolved for it (rows are locked with `skip locked`, so two drains share the
 * work). Returns how many batches were drained; a rejection of `deliver` keeps its batches.
 */
export async function drainOutboxBatches(
  pool: pg.Pool,
  schema: string,
  deliver: (events: AuditEvent[]) => Promise<void>,
): Promise<number> {
  const table = outboxTable(schema);
  let drained = 0;
  for (;;) {
    const client = await pool.connect();
    try {
      await client.query('begin');
      const rows = await client.query(`select id, events from ${table} order by id limit 50 for update skip locked`);
      if (rows.rows.length === 0) {
        await client.query('commit');
        return drained;
      }
      for (const r of rows.rows) await deliver(r.events as AuditEvent[]);
      await client.query(`delete from ${table} where id = any($1::bigint[])`, [rows.rows.map((r) => r.id)]);
      await client.query('commit');
      drained += rows.rows.length;
    } catch (err) {
      await client.query('rollback').catch(() => {});
      throw err;
    } finally {
      client.release();
    }
  }
}

export type OutboxStats = { batches: number; events: number; oldestAt: Date | null };

/** What waits in the outbox: batches, events in them, and the oldest batch's time. */
export async function outboxStats(pool: pg.Pool, schema: string): Promise<OutboxStats> {
  const res = await pool.query(
    `select count(*)::int8 as batches, coalesce(sum(jsonb_array_length(events)), 0)::int8 as events,
       min(created_at) as oldest from ${outboxTable(schema)}`,
  );
  const r = res.rows[0];
  return {
    batches: Number(r?.batches ?? 0),
    events: Number(r?.events ?? 0),
    oldestAt: (r?.oldest as Date | null) ?? null,
  };
}
