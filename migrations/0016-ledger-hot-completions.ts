import { type Kysely, sql } from 'kysely';

/**
 * Completions as HOT updates: the ledger's pages keep room for the completed version of every
 * row a claim inserted there. No index covers a column a completion changes (0008, 0010), so a
 * completion is a HOT update whenever its new version fits on the row's page; at fillfactor 90 few
 * did, since a batch of claims fills its pages and its completions follow: a non-HOT completion
 * writes the whole row on another page, a lock record and an entry in every index (about 750 B of
 * WAL against about 400 B for a HOT one), and leaves a dead version elsewhere.
 *
 * Fillfactor 35, by measurement (`npm run bench:ledger-wal`: 2,000 fresh jobs in batches of 200,
 * a worker's claim with owner, job id and queue, a sealed result; rows of 248 B locked, 452 B
 * completed): share of HOT completions and WAL per fresh job at 90 / 50 / 45 / 40 / 35: 7 / 57 /
 * 74 / 92 / 100 %, 1,206 / 1,041 / 985 / 924 / 899 B; bytes on disk per row after the run 912 /
 * 1,056 / 991 / 898 / 872 (the non-HOT completions' dead versions and index entries cost more
 * space than the room kept free). A page takes new rows up to 35 % full (about 11 rows of 248 B),
 * the room for their completed versions (11 × 452 B) beside them. In a ledger that is swept, the
 * density of live rows comes out the same: 8 waves of 2,000 fresh jobs, the oldest wave but 3
 * deleted and the table vacuumed after each, left the 6,000 live rows on 527 pages at fillfactor
 * 90 and on 510 at 35 (a non-HOT completion's new version also lands on a page with room, away
 * from its dead one). The whole heap's size was not comparable there: other sessions' snapshots
 * held vacuum back by different amounts in each run. Only pages filled from now on follow the
 * setting (no rewrite).
 *
 * From this version a fresh claim also leaves the row's lease owner, job id and queue columns null
 * (the claim's entry in the record of transitions holds them, as a completion already relied on)
 * and stores a job id derived from the key as a marker (src/ledger/recorded-transition.ts): a
 * locked row 368 → 240 B, a completed one 500 → 452 B (WAL per fresh job 1,362 → 887 B). Rows
 * written before keep theirs; no data changes here.
 */
export function ledgerHotCompletionsMigration(schema: string) {
  const table = sql.table(`${schema}.idempotency_ledger`);
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await sql`alter table ${table} set (fillfactor = 35)`.execute(db);
    },
    async down(db: Kysely<unknown>): Promise<void> {
      await sql`alter table ${table} set (fillfactor = 90)`.execute(db);
    },
  };
}
