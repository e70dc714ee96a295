import type { StatisticsRefresh } from '../db/statistics-refresh.js';
import { type ClaimRow, claimsOf, inKeyOrder, newRow } from './claim-rows.js';
import type { ClaimAnswerRow } from './sql/claim.js';
import type { StatementRunner } from './statement-runner.js';

/**
 * Claims distinct keys; the answer per key is its row. Three statements, each only for the keys
 * that need it: a read (`peek`) answers every key whose row is not claimable (replays, conflicts,
 * live leases: no write, no commit); a plain insert (`insertNew`) claims the keys that were absent;
 * the full claim statement (`claim`) takes over or reclaims the rest, and any key a concurrent
 * claimer inserted between the read and the insert. When recent keys were mostly new, the read
 * is skipped and the insert goes first. Each key's outcome is that of the full claim alone.
 */
export class Claimer {
  /** Share of recently claimed keys that already had a row: decides read-first or insert-first. */
  private existingShare = 1;

  constructor(
    private readonly sql: StatementRunner,
    private readonly clockOffsetMs: number,
    /** Analyzes a young table so that named statements' cached plans use its index (named statements only). */
    private readonly statistics: StatisticsRefresh | undefined,
  ) {}

  async claimBatch(reqs: readonly ClaimRow[]): Promise<Map<string, ClaimAnswerRow>> {
    const sorted = inKeyOrder(reqs);
    const answers = new Map<string, ClaimAnswerRow>();
    let absent: readonly ClaimRow[] = sorted;
    const rest: ClaimRow[] = [];
    // Mostly new keys lately: the read would find nothing, so insert first.
    const readFirst = this.existingShare >= 0.2;
    if (readFirst) {
      const peeked = await this.sql.run('peek', {
        keys: sorted.map((r) => r.key),
        fingerprints: sorted.map((r) => r.claim.fingerprint),
        clockOffsetMs: this.clockOffsetMs,
      });
      const found = new Map(peeked.map((row) => [row.key, row]));
      const none: ClaimRow[] = [];
      for (const r of sorted) {
        const row = found.get(r.key);
        if (!row) none.push(r);
        else if (row.claimable) rest.push(r);
        else answers.set(r.key, row);
      }
      absent = none;
    }
    if (absent.length > 0) {
      // A concurrent claimer inserted one of the keys first: the full claim arbitrates them all.
      const inserted = await this.sql
        .runRetryingDeadlock('insertNew', claimsOf(absent, this.clockOffsetMs))
        .catch((err: unknown) => {
          if ((err as { code?: string }).code === '23505') return [];
          throw err;
        });
      this.statistics?.add(inserted.length);
      if (inserted.length > 0) {
        const byKey = new Map(absent.map((r) => [r.key, r]));
        for (const row of inserted) answers.set(row.key, newRow(byKey.get(row.key) as ClaimRow, row));
      }
      for (const r of absent) if (!answers.has(r.key)) rest.push(r);
    }
    // An exponential average of the share of keys that already had a row.
    const existing = readFirst ? sorted.length - absent.length : rest.length;
    this.existingShare = 0.8 * this.existingShare + 0.2 * (existing / sorted.length);
    if (rest.length > 0) {
      const ordered = inKeyOrder(rest);
      const claimed = await this.sql.runRetryingDeadlock('claim', claimsOf(ordered, this.clockOffsetMs));
      for (const row of claimed) answers.set(row.key, row);
    }
    return answers;
  }
}
