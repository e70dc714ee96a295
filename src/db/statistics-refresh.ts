import type pg from 'pg';

/** Rows a store inserts before it checks its table's statistics, once each. */
export const STATISTICS_CHECKS_AT = [1_000, 3_000, 10_000, 30_000, 100_000, 300_000, 1_000_000] as const;

/**
 * Keeps a young table's query plans from going stale. A connection plans each named statement
 * once (a generic plan, after five custom ones) and keeps that plan until the table's statistics
 * change. A plan made while the table was nearly empty reads it whole (a hash join over a
 * sequential scan is the cheapest way to read a few pages) and goes on reading it whole, every
 * batch, as the table grows, until autovacuum first analyzes it, a minute or more later. In
 * `npm run bench:scale` on a new ledger, fresh pairs fell from 3,000 to 1,400/s and replays from
 * 6,000 to 3,300/s over the first 30,000 rows, and rose to 5,000 and 20,000/s when it did; the
 * audit store's writes of 500-event batches fell from 26,300 to 12,900 events/s over 160,000
 * events, each batch reading `audit_event_ids` whole. A plan is only as right as the statistics
 * it was made from: with 20,000 ids analyzed, reading them whole still is the cheapest way to
 * find a batch's ids (1.6 ms); with 35,000, the index is (and stays so as the table grows).
 *
 * So when its store (the ledger: `idempotency_ledger`; the audit store: `audit_event_ids`) has
 * inserted 1,000, 3,000, 10,000, 30,000 rows and so on to 1,000,000 (past that, autovacuum's
 * analyze every 10 % of changes keeps up), it reads the table's row count estimate and, if that
 * is below what this store alone inserted, analyzes the table: Postgres then drops every
 * session's cached plans of it, and the next ones use its indexes. `SKIP_LOCKED`: when another
 * process holds the table's maintenance lock (autovacuum, an index build), it does not wait with
 * one of the pool's connections; it skips. Without the privilege to analyze, Postgres only
 * warns; an error is ignored (autovacuum does the same work later).
 */
export class StatisticsRefresh {
  private inserted = 0;
  private next = 0;
  private running: Promise<void> | undefined;
  /** ANALYZE statements this store ran (for tests and metrics). */
  analyzed = 0;

  constructor(
    private readonly pool: pg.Pool,
    /** A schema-qualified name whose parts passed the schema grammar. */
    private readonly table: string,
  ) {}

  /** Counts rows the store inserted; at a threshold, starts a check in the background. */
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

  /** Resolves when no check is running (a store's close waits for it). */
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
