/**
 * Per-statement figures of `pg_stat_statements` over a section of a benchmark: reset before it,
 * read after it. Only where the extension can be used (the server preloads it: e.g. a bench's
 * private server started with `shared_preload_libraries=pg_stat_statements`); elsewhere
 * {@link statementStats} answers undefined and the readings are empty.
 */
import type pg from 'pg';

/** One statement's totals over a section (buffer counts in blocks, WAL in bytes and records). */
export type StatementTotals = {
  /** The statement's id: its text may read either as sent or normalized (constants as parameters). */
  queryid: string;
  query: string;
  /** Where the statement ran: `toplevel` false for one run inside another (a function's). */
  toplevel: boolean;
  calls: number;
  ms: number;
  rows: number;
  hit: number;
  read: number;
  dirtied: number;
  written: number;
  walBytes: number;
  walFpi: number;
  walRecords: number;
};

const COLUMNS = `queryid::text as queryid, query, toplevel, calls, total_exec_time as ms, rows, shared_blks_hit as hit, shared_blks_read as read,
  shared_blks_dirtied as dirtied, shared_blks_written as written, wal_bytes as wal_bytes, wal_fpi as wal_fpi,
  wal_records as wal_records`;

/** Reset and read of the statistics on `db`, or undefined when the extension cannot be used there. */
export async function statementStats(db: pg.Pool): Promise<
  | {
      reset(): Promise<void>;
      /** Statements that ran since the last reset, but the benchmark's own bookkeeping queries. */
      read(): Promise<StatementTotals[]>;
    }
  | undefined
> {
  try {
    await db.query('create extension if not exists pg_stat_statements');
    await db.query('select pg_stat_statements_reset()');
  } catch {
    return undefined;
  }
  return {
    async reset() {
      await db.query('select pg_stat_statements_reset()');
    },
    async read() {
      const res = await db.query(
        `select ${COLUMNS} from pg_stat_statements
         where calls > 0 and query not like '%pg_stat%' and query not like '%pg_current_wal_lsn%'
         order by total_exec_time desc`,
      );
      return res.rows.map((r) => ({
        queryid: String(r.queryid),
        query: String(r.query),
        toplevel: r.toplevel !== false,
        calls: Number(r.calls),
        ms: Number(r.ms),
        rows: Number(r.rows),
        hit: Number(r.hit),
        read: Number(r.read),
        dirtied: Number(r.dirtied),
        written: Number(r.written),
        walBytes: Number(r.wal_bytes),
        walFpi: Number(r.wal_fpi),
        walRecords: Number(r.wal_records),
      }));
    },
  };
}

/** Adds `more` into `into`, statement by statement (by query id). */
export function addTotals(into: Map<string, StatementTotals>, more: readonly StatementTotals[]): void {
  for (const s of more) {
    const id = `${s.queryid}:${s.toplevel}`;
    const had = into.get(id);
    if (!had) {
      into.set(id, { ...s });
      continue;
    }
    for (const k of Object.keys(s) as (keyof StatementTotals)[]) {
      if (typeof s[k] === 'number') (had[k] as number) += s[k] as number;
    }
  }
}

/** A short label of a statement's text: its first words, whitespace folded. */
export function statementLabel(query: string, length = 48): string {
  const flat = query.replace(/\s+/g, ' ').trim();
  return flat.length > length ? `${flat.slice(0, length - 1)}…` : flat;
}
