import type pg from 'pg';
import { checkSchema } from '../db/connection.js';

export type DeadLetterStats = { count: number; newestAt: Date | null };

/** Rows in `audit_dead_letter` (events Postgres or the writer refused), and the newest one's time. */
export async function deadLetterStats(pool: pg.Pool, schema: string): Promise<DeadLetterStats> {
  const res = await pool.query(
    `select count(*)::int8 as n, max(created_at) as newest from ${checkSchema(schema)}.audit_dead_letter`,
  );
  const r = res.rows[0];
  return { count: Number(r?.n ?? 0), newestAt: (r?.newest as Date | null) ?? null };
}
