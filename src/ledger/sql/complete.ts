import { append, code, ms, now } from './fragments.js';
import { type Clock, type Int8, statement } from './statement.js';

/** One key's completion: the epoch that holds it and its result as JSON text. */
export type Completion = { key: string; epoch: number; text: string };

/**
 * The completion update over the rows `u(key, epoch, result)` (its FROM): each key fenced by its
 * epoch, the database time from parameter `$clock`. Shared by `complete` and `insertAndComplete`.
 */
export const completeUpdate = (
  ledger: string,
  clock: number,
  from: string,
) => `update ${ledger} t set status = 'completed', result = u.result::jsonb, error = null, retryable = null,
  lease_owner = null, lease_expires_at = null, last_transition = null,
  job_id = case when t.transitions is null then t.job_id end, queue = case when t.transitions is null then t.queue end,
  completed_at = null, expires_at = null, updated_at = ${now(clock)},
  transitions = ${append('t.transitions', code('completed'), 't.epoch', now(clock))}
from ${from}
where t.key = u.key and t.epoch = u.epoch and t.status = 'locked' returning t.key, ${ms('t.updated_at')} as at_ms`;

/**
 * Completion of one key or a batch of distinct keys, each fenced by its epoch; returns each
 * completed key and the database time in whole milliseconds. The job id and queue columns
 * are cleared: the claim's entry in the record of transitions holds them (`j`, `q`), and a
 * completed row is kept for its retention, so they would be stored twice for as long (a
 * row from before the record keeps them).
 * Params: 1 keys, 2 epochs, 3 results (json text); 4 clock offset.
 */
export const complete = statement<{ completions: readonly Completion[] } & Clock, { key: string; at_ms: Int8 }>({
  text: ({ ledger }) =>
    completeUpdate(ledger, 4, 'unnest($1::text[], $2::int4[], $3::text[]) as u(key, epoch, result)'),
  values: (p) => [
    p.completions.map((c) => c.key),
    p.completions.map((c) => c.epoch),
    p.completions.map((c) => c.text),
    p.clockOffsetMs,
  ],
});
