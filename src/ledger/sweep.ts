import type pg from 'pg';
import { IdempotencyConfigError } from '../errors/errors.js';
import type { SweepCursor, SweepEventIds, SweepPage } from './ledger-options.js';
import { toRecord } from './ledger-record.js';
import type { StatementRunner } from './statement-runner.js';
import type { LedgerRecord } from './types.js';

/**
 * One page of the sweep, in one transaction on a client of `pool`: the candidates after `after`
 * (`sweepCandidates`, locked), the audit events they need (`storedEventIds`), the delete of
 * those whose events are all stored (`sweepKeys`). See `PostgresLedger.sweepPage`.
 */
export async function sweepPage(
  pool: pg.Pool,
  sql: StatementRunner,
  clockOffsetMs: number,
  batchSize: number,
  after: SweepCursor | undefined,
  eventIds: SweepEventIds,
): Promise<SweepPage> {
  if (!Number.isInteger(batchSize) || batchSize < 1) {
    throw new IdempotencyConfigError('batchSize must be a positive integer', { option: 'batchSize' });
  }
  const client = await pool.connect();
  try {
    await client.query('begin');
    const rows = await sql.run(
      'sweepCandidates',
      { batchSize, afterAt: after?.at ?? '-infinity', afterKey: after?.key ?? '', clockOffsetMs },
      client,
    );
    const records = rows.map(toRecord);
    // A row from before transitions were recorded has no record to keep: it goes as it did.
    const ids = records.map((r) => (r.transitions === null ? [] : eventIds(r)));
    const all = ids.flat();
    const stored = new Set<string>(
      all.length === 0 ? [] : (await sql.run('storedEventIds', { eventIds: all }, client)).map((r) => r.event_id),
    );
    const done: string[] = [];
    const pending: LedgerRecord[] = [];
    records.forEach((r, i) => {
      if ((ids[i] as readonly string[]).every((id) => stored.has(id))) done.push(r.key);
      else pending.push(r);
    });
    if (done.length > 0) await sql.run('sweepKeys', { keys: done }, client);
    await client.query('commit');
    const last = rows[rows.length - 1];
    return {
      deleted: done.length,
      scanned: rows.length,
      pending,
      next: last ? { at: last.cursor_at, key: last.key } : undefined,
    };
  } catch (err) {
    await client.query('rollback').catch(() => {});
    throw err;
  } finally {
    client.release();
  }
}
