import type pg from 'pg';
import type { TestContext } from './context.js';

/**
 * A table's scan counters in the test's schema, once `session` (the pool whose statements are
 * under test) has reported its statistics: a session reports them at the end of a transaction at
 * most once a second.
 */
export async function tableScans(
  t: TestContext,
  session: pg.Pool,
  table: string,
): Promise<{ seq: number; idx: number }> {
  await new Promise((r) => setTimeout(r, 1_100));
  await session.query('select 1');
  const res = await t.query<{ seq: string; idx: string }>(
    `select seq_scan as seq, coalesce(idx_scan, 0) as idx from pg_stat_user_tables
     where schemaname = $1 and relname = $2`,
    [t.schema, table],
  );
  return { seq: Number(res.rows[0]?.seq), idx: Number(res.rows[0]?.idx) };
}

/** The planner's row count estimate of a table in the test's schema (what ANALYZE last counted). */
export async function rowEstimate(t: TestContext, table: string): Promise<number> {
  const res = await t.query<{ n: number }>('select reltuples::float8 as n from pg_class where oid = $1::regclass', [
    `${t.schema}.${table}`,
  ]);
  return res.rows[0]?.n ?? 0;
}
