import { CLAIM_INPUT, type ClaimBatch, claimValues, insertClaimed } from './claim-input.js';
import { type Completion, completeUpdate } from './complete.js';
import { ms } from './fragments.js';
import { type Int8, statement } from './statement.js';

/**
 * The claims of absent keys (as `insertNew`) and the completions of finished attempts (as
 * `complete`) in one statement: one commit for a batch of both, where a fresh job would otherwise
 * cost a commit for its claim and another for its completion. The completions are fenced by their
 * epochs; the insert is the plain insert of the keys that have no row. A row answers
 * `completed` true for a completion, false for a claim's insert; a key with no row in the answer
 * was fenced (a completion) or has a row (a claim: it goes through the full claim). A key a
 * concurrent claimer inserted meanwhile fails the whole statement (unique violation, 23505), as
 * `insertNew` does: nothing of it is written, and its completions run again on their own.
 * Params: the claims' $1..$16 (see claim-input.ts, clock offset $15); the completions' keys $17,
 * epochs $18, results $19.
 */
export const insertAndComplete = statement<
  ClaimBatch & { completions: readonly Completion[] },
  { key: string; at_ms: Int8; completed: boolean }
>({
  text: ({
    ledger,
  }) => `with done as (${completeUpdate(ledger, 15, 'unnest($17::text[], $18::int4[], $19::text[]) as u(key, epoch, result)')}),
fresh as (${insertClaimed(ledger, false)}
  from ${CLAIM_INPUT}
  where not exists (select 1 from ${ledger} x where x.key = i.key)
  order by i.key
  returning key, ${ms('updated_at')} as at_ms)
select key, at_ms, true as completed from done
union all
select key, at_ms, false from fresh`,
  values: (p) => [
    ...claimValues(p),
    p.completions.map((c) => c.key),
    p.completions.map((c) => c.epoch),
    p.completions.map((c) => c.text),
  ],
});
