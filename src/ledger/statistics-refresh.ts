import type pg from 'pg';

/** Rows a ledger inserts before it checks its table's statistics, once each. */
export const STATISTICS_CHECKS_AT = [1_000, 10_000, 100_000] as const;

/**
 * Keeps a young ledger's query plans from going stale. A connection plans each named statement
 * once (a generic plan, after five custom ones) and keeps that plan until the table's statistics
 * change. A plan made while the table was nearly empty reads it whole (a hash join over a
 * sequential scan is the cheapest way to read a few pages) and goes on reading it whole, every
 * batch, as the table grows, until autovacuum first analyzes it, a minute or more later: in
 * `npm run bench:scale` on a new table, fresh pairs fell from 3,000 to 1,400/s and replays from
 * 6,000 to 3,300/s over the first 30,000 rows, and rose to 5,000 and 20,000/s when it did.
 *
 * So when this ledger has inserted 1,000, 10,000 and 100,000 rows, it reads the table's row count
 * estimate and, if that is below what it alone inserted, analyzes the table: Postgres then drops
 * every session's cached plans of it, and the next ones use its primary key. `SKIP_LOCKED`: when
 * another process holds the table's maintenance lock (autovacuum, an index build), it does not
 * wait with one of the pool's connections; it skips. Without the privilege to analyze, Postgres
 * only warns; an error is ignored (autovacuum does the same work later).
 */
export class StatisticsRefresh {
  private inserted = 0;
  private next = 0;
  private running: Promise<void> | undefined;
  /** ANALYZE statements this ledger ran (for tests and metrics). */
  analyzed = 0;

  constructor(
    private readonly pool: pg.Pool,
    /** A schema-qualified name whose parts passed the schema grammar. */
    private readonly table: string,
  ) {}

  /** Counts rows the ledger inserted; at a threshold, starts a check in the background. */
  add(rows: number): void {
    this.inserted += rows;
    const at = STATISTICS_CHECKS_AT[this.next];
    if (at === undefined || this.inserted < at || this.running) return;
    this.next++;
    this.running = this.check(at)
      .catch(() => {})
      .finally(() => {
        this.running = undefined;
      });
  }

  /** Resolves when no check is running (the ledger's close waits for it). */
  async settled(): Promise<void> {
    await this.running;
  }

  private async check(at: number): Promise<void> {
    const res = await this.pool.query<{ n: number }>(
      'select reltuples::float8 as n from pg_class where oid = $1::regclass',
      [this.table],
    );
    if ((res.rows[0]?.n ?? 0) >= at) return;
    await this.pool.query(`analyze (skip_locked) ${this.table}`);
    this.analyzed++;
  }
}
