import type pg from 'pg';
import { poolErrorCount } from '../db/pool-errors.js';
import type { StatisticsRefresh } from '../db/statistics-refresh.js';

/**
 * A ledger's counts. `staleWrites`: writes refused because their epoch was stale; a rising count
 * means leases are too short. `poolErrors`: idle connections of the pool that Postgres (or a
 * proxy) dropped, replaced by the pool; counted when the library watches the pool (see `pool`).
 */
export type LedgerMetrics = {
  staleWrites: number;
  claims: number;
  /**
   * Fenced writes (completions, failures, releases, heartbeats) that found the row of their
   * claim gone, or at a lower epoch: records lost after they were acknowledged (see
   * `RecordLostError`). Any count above zero means the database lost acknowledged writes.
   */
  readonly lostRecords: number;
  readonly poolErrors: number;
  /** ANALYZE statements this ledger ran on its young table (see StatisticsRefresh). */
  readonly tablesAnalyzed: number;
};

/** The counts of a ledger on `pool`; `lost` reads its count of lost records. */
export function ledgerMetrics(
  pool: pg.Pool,
  statistics: StatisticsRefresh | undefined,
  lost: () => number,
): LedgerMetrics {
  return {
    staleWrites: 0,
    claims: 0,
    get lostRecords() {
      return lost();
    },
    get poolErrors() {
      return poolErrorCount(pool);
    },
    get tablesAnalyzed() {
      return statistics?.analyzed ?? 0;
    },
  };
}
