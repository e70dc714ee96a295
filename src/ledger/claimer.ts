import type { StatisticsRefresh } from '../db/statistics-refresh.js';
import { type ClaimRow, claimsOf, inKeyOrder, newRow } from './claim-rows.js';
import type { ClaimAnswerRow } from './sql/claim.js';
import type { Completion } from './sql/complete.js';
import type { Int8 } from './sql/statement.js';
import type { StatementRunner } from './statement-runner.js';

/** A completed key's row: the database time of its completion. */
export type CompletedRow = { key: string; at_ms: Int8 };

/**
 * Claims distinct keys; the answer per key is its row. Three statements, each only for the keys
 * that need it: a read (`peek`) answers every key whose row is not claimable (replays, conflicts,
 * live leases: no write, no commit); a plain insert (`insertNew`) claims the keys that were absent;
 * the full claim statement (`claim`) takes over or reclaims the rest, and any key a concurrent
 * claimer inserted between the read and the insert. When recent keys were mostly new, the read
 * is skipped and the insert goes first ({@link insertFirst}): then the insert may carry the
 * completions of finished attempts too ({@link writeBatch}), one commit for both. Each key's
 * outcome is that of the full claim alone.
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

  /** Recent keys were mostly new: a read would find nothing, so claims insert first. */
  get insertFirst(): boolean {
    return this.existingShare < 0.2;
  }

  async claimBatch(reqs: readonly ClaimRow[]): Promise<Map<string, ClaimAnswerRow>> {
    const sorted = inKeyOrder(reqs);
    const answers = new Map<string, ClaimAnswerRow>();
    if (!this.insertFirst) {
      const peeked = await this.sql.run('peek', {
        keys: sorted.map((r) => r.key),
        fingerprints: sorted.map((r) => r.claim.fingerprint),
        clockOffsetMs: this.clockOffsetMs,
      });
      const found = new Map(peeked.map((row) => [row.key, row]));
      const absent: ClaimRow[] = [];
      const rest: ClaimRow[] = [];
      for (const r of sorted) {
        const row = found.get(r.key);
        if (!row) absent.push(r);
        else if (row.claimable) rest.push(r);
        else answers.set(r.key, row);
      }
      this.observe(sorted.length - absent.length, sorted.length);
      const inserted = absent.length > 0 ? (await this.insert(absent, [])).inserted : [];
      await this.settle(absent, inserted, rest, answers);
      return answers;
    }
    // Keys known to have a row (a write batch's insert found one) go straight to the full claim.
    const absent = sorted.filter((r) => !r.hasRow);
    const known = sorted.filter((r) => r.hasRow);
    const inserted = absent.length > 0 ? (await this.insert(absent, [])).inserted : [];
    // No read preceded: the keys the insert found with a row count toward the share of existing keys.
    this.observe(absent.length - inserted.length, absent.length);
    await this.settle(absent, inserted, known, answers);
    return answers;
  }

  /**
   * Claims of keys expected absent (insert first) and completions of finished attempts, distinct
   * keys, in one statement (`insertAndComplete`): a batch of fresh jobs costs one commit for
   * their claims and the completions of the jobs before them. Answers each inserted claim's new
   * row and each completed key's row: a completion without one was fenced, and a claim without
   * one found its key with a row (or inserted by a concurrent claimer), which the full claim
   * decides ({@link claimBatch}, the claim marked `hasRow`). The full claim is not run here, so
   * that completions never wait for it, nor fail with it.
   */
  async writeBatch(
    claims: readonly ClaimRow[],
    completions: readonly Completion[],
  ): Promise<Map<string, ClaimAnswerRow | CompletedRow>> {
    const done = inKeyOrder(completions);
    if (claims.length === 0) {
      const rows = await this.sql.runRetryingDeadlock('complete', {
        completions: done,
        clockOffsetMs: this.clockOffsetMs,
      });
      return new Map(rows.map((row) => [row.key, row]));
    }
    const sorted = inKeyOrder(claims);
    const { inserted, completed } = await this.insert(sorted, done);
    this.observe(sorted.length - inserted.length, sorted.length);
    const answers = new Map<string, ClaimAnswerRow | CompletedRow>();
    for (const row of inserted) answers.set(row.key, row);
    for (const row of completed) answers.set(row.key, row);
    return answers;
  }

  /**
   * The plain insert of `absent` (key order), with the completions `done` (key order) when there
   * are any. A key a concurrent claimer inserted first fails the statement (23505) and writes
   * nothing: then no key is inserted (the full claim arbitrates them all) and the completions run
   * again alone. Answers each inserted key with its new row.
   */
  private async insert(
    absent: readonly ClaimRow[],
    done: readonly Completion[],
  ): Promise<{ inserted: ClaimAnswerRow[]; completed: CompletedRow[] }> {
    const claims = claimsOf(absent, this.clockOffsetMs);
    try {
      const rows =
        done.length === 0
          ? await this.sql.runRetryingDeadlock('insertNew', claims)
          : await this.sql.runRetryingDeadlock('insertAndComplete', { ...claims, completions: done });
      const byKey = new Map(absent.map((r) => [r.key, r]));
      const inserted: ClaimAnswerRow[] = [];
      const completed: CompletedRow[] = [];
      for (const row of rows) {
        if ('completed' in row && row.completed) completed.push(row);
        else inserted.push(newRow(byKey.get(row.key) as ClaimRow, row));
      }
      this.statistics?.add(inserted.length);
      return { inserted, completed };
    } catch (err) {
      if ((err as { code?: string }).code !== '23505') throw err;
      const completed =
        done.length === 0
          ? []
          : await this.sql.runRetryingDeadlock('complete', { completions: done, clockOffsetMs: this.clockOffsetMs });
      return { inserted: [], completed };
    }
  }

  /**
   * Answers the inserted keys of `absent` with their new rows, and runs the full claim for the
   * rest of `absent` and for `rest` (claimable rows the read found, or keys known to have one).
   */
  private async settle(
    absent: readonly ClaimRow[],
    inserted: readonly ClaimAnswerRow[],
    rest: ClaimRow[],
    answers: Map<string, ClaimAnswerRow>,
  ): Promise<void> {
    for (const row of inserted) answers.set(row.key, row);
    const full = [...rest];
    for (const r of absent) if (!answers.has(r.key)) full.push(r);
    if (full.length > 0) {
      const claimed = await this.sql.runRetryingDeadlock('claim', claimsOf(inKeyOrder(full), this.clockOffsetMs));
      for (const row of claimed) answers.set(row.key, row);
    }
  }

  /** Folds `existing` of `total` claimed keys that already had a row into the exponential average. */
  private observe(existing: number, total: number): void {
    if (total > 0) this.existingShare = 0.8 * this.existingShare + 0.2 * (existing / total);
  }
}
