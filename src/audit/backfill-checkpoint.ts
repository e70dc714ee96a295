import type pg from 'pg';
import { checkSchema } from '../db/connection.js';
import { LEDGER_START, type LedgerCursor } from '../ledger/scans.js';

/**
 * The backfill's checkpoints (`audit_backfill_checkpoint`): per name, the ledger position the
 * backfill has finished and its cumulative counters, so a killed backfill resumes where it was.
 */
export type BackfillCheckpoint = {
  name: string;
  cursor: LedgerCursor;
  rowsScanned: number;
  eventsEnqueued: number;
};

const checkpointTable = (schema: string) => `${checkSchema(schema)}.audit_backfill_checkpoint`;

type CheckpointRow = { at: string | null; last_key: string | null; rows_scanned: string; events_enqueued: string };

const fromRow = (name: string, row: CheckpointRow | undefined): BackfillCheckpoint => ({
  name,
  cursor: { at: row?.at ?? LEDGER_START.at, key: row?.last_key ?? LEDGER_START.key },
  rowsScanned: Number(row?.rows_scanned ?? 0),
  eventsEnqueued: Number(row?.events_enqueued ?? 0),
});

const SELECT = 'select last_updated_at::text as at, last_key, rows_scanned, events_enqueued';

/** The checkpoint of `name` as it stands (a fresh one when none is kept); writes nothing. */
export async function readCheckpoint(pool: pg.Pool, schema: string, name: string): Promise<BackfillCheckpoint> {
  const res = await pool.query<CheckpointRow>(`${SELECT} from ${checkpointTable(schema)} where name = $1`, [name]);
  return fromRow(name, res.rows[0]);
}

/**
 * The checkpoint of `name`, created when missing. With `since`, it is moved back to that time
 * (its counters kept), so the backfill starts again from there.
 */
export async function openCheckpoint(
  pool: pg.Pool,
  schema: string,
  name: string,
  since?: Date,
): Promise<BackfillCheckpoint> {
  const cp = checkpointTable(schema);
  if (since) {
    await pool.query(
      `insert into ${cp} (name, last_updated_at, last_key) values ($1, $2, '')
       on conflict (name) do update set last_updated_at = excluded.last_updated_at, last_key = '', updated_at = now()`,
      [name, since],
    );
  } else {
    await pool.query(`insert into ${cp} (name) values ($1) on conflict do nothing`, [name]);
  }
  return readCheckpoint(pool, schema, name);
}

/** Records a finished page: the new position and the cumulative counters. */
export async function saveCheckpoint(pool: pg.Pool, schema: string, cp: BackfillCheckpoint): Promise<void> {
  await pool.query(
    `update ${checkpointTable(schema)} set last_updated_at = $2, last_key = $3, rows_scanned = $4, events_enqueued = $5, updated_at = now() where name = $1`,
    [cp.name, cp.cursor.at, cp.cursor.key, cp.rowsScanned, cp.eventsEnqueued],
  );
}
