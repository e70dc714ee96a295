import type pg from 'pg';
import type { TestContext } from './context.js';

/**
 * A table's scan counters in the test's schema (sequential scans, index scans, and the rows both
 * read), once every connection of `session` (the pool whose
 * statements are under test) has reported its statistics. A session reports them when it goes idle
 * at most once a second; `pg_stat_force_next_flush()` makes it report them as it goes idle after
 * that call, before the call's answer reaches the client.
 */
export async function tableScans(
  t: TestContext,
  session: pg.Pool,
  table: string,
): Promise<{ seq: number; idx: number; rows: number }> {
  const clients = await Promise.all(Array.from({ length: Math.max(1, session.totalCount) }, () => session.connect()));
  try {
    await Promise.all(clients.map((c) => c.query('select pg_stat_force_next_flush()')));
  } finally {
    for (const c of clients) c.release();
  }
  const res = await t.query<{ seq: string; idx: string; rows: string }>(
    `select seq_scan as seq, coalesce(idx_scan, 0) as idx, seq_tup_read + coalesce(idx_tup_fetch, 0) as rows
     from pg_stat_user_tables
     where schemaname = $1 and relname = $2`,
    [t.schema, table],
  );
  return { seq: Number(res.rows[0]?.seq), idx: Number(res.rows[0]?.idx), rows: Number(res.rows[0]?.rows) };
}

/** The planner's row count estimate of a table in the test's schema (what ANALYZE last counted). */
export async function rowEstimate(t: TestContext, table: string): Promise<number> {
  const res = await t.query<{ n: number }>('select reltuples::float8 as n from pg_class where oid = $1::regclass', [
    `${t.schema}.${table}`,
  ]);
  return res.rows[0]?.n ?? 0;
}
