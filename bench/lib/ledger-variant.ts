/**
 * Variants of the ledger's fresh-claim insert, for measuring a candidate change against the
 * ledger as it is in the same run: a PostgresLedger whose `insertNew` and `insertAndComplete`
 * texts are rewritten (the rest of the ledger unchanged). Each rewrite keeps what the statement
 * answers and every guarantee the ledger gives (see each one).
 */
import type { PostgresLedger } from '../../src/ledger/postgres-ledger.js';

const CLAIM_NOW = "(now() + $15::int8 * interval '1 millisecond')";
const MS_OF_NOW = `floor(extract(epoch from ${CLAIM_NOW}) * 1000)::int8`;

/** The insert part of a statement's text (after its first `insert into`), rewritten by `f`. */
const inInsert = (text: string, f: (insert: string) => string): string => {
  const at = text.indexOf('insert into');
  if (at < 0) throw new Error('no insert in the statement');
  return text.slice(0, at) + f(text.slice(at));
};

const replaceOnce = (text: string, from: string | RegExp, to: string): string => {
  const out = text.replace(from, to);
  if (out === text) throw new Error(`rewrite found nothing to replace: ${String(from)}`);
  return out;
};

/** The rewrites by name. */
export const INSERT_VARIANTS: Record<string, (text: string) => string> = {
  /**
   * `on conflict (key) do nothing` instead of `where not exists (…)`: one descent of the primary
   * key per row instead of two. A key with a row answers no row, as before (it goes through the
   * full claim); a key a concurrent claimer inserted meanwhile answers no row too, after waiting
   * for that claimer's commit, instead of failing the statement (23505): it goes through the full
   * claim as well, and the other keys of the batch stay inserted.
   */
  onconflict: (text) =>
    inInsert(text, (ins) =>
      replaceOnce(
        ins,
        /\n {2}where not exists \(select 1 from [^)]+ x where x\.key = i\.key\)\n {2}order by i\.key/,
        '\n  order by i.key\n  on conflict (key) do nothing',
      ),
    ),
  /**
   * The database time and its milliseconds computed once per statement (a one-row join) instead
   * of once per row and column: the same values (`now()` is the transaction's time). `offset 0`
   * keeps the planner from pulling the expressions back up into every row.
   */
  lean: (text) =>
    inInsert(text, (ins) =>
      replaceOnce(
        ins.split(MS_OF_NOW).join('c.m').split(CLAIM_NOW).join('c.n'),
        'job_id, queue, task_id, step_id, facts)',
        `job_id, queue, task_id, step_id, facts)
    cross join (select z.n, floor(extract(epoch from z.n) * 1000)::int8 as m from (select ${CLAIM_NOW} as n offset 0) z offset 0) c`,
      ),
    ),
};

/** Rewrites `ledger`'s fresh-claim inserts with the named variants (in order), before its first use. */
export function useInsertVariant(ledger: PostgresLedger, names: readonly string[]): void {
  const runner = (ledger as unknown as { sql: { texts: Record<string, string> } }).sql;
  for (const statement of ['insertNew', 'insertAndComplete']) {
    let text = runner.texts[statement];
    if (text === undefined) throw new Error(`no statement ${statement}`);
    for (const name of names) {
      const rewrite = INSERT_VARIANTS[name];
      if (!rewrite) throw new Error(`unknown insert variant ${name} (${Object.keys(INSERT_VARIANTS).join(', ')})`);
      text = rewrite(text);
    }
    runner.texts[statement] = text;
  }
}
