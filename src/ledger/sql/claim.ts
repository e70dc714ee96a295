import type { LedgerStatus, RecordedError } from '../types.js';
import { CLAIM_INPUT, CLAIM_NOW, type ClaimBatch, claimValues, insertClaimed } from './claim-input.js';
import {
  append,
  claimAnswer,
  claimable,
  claimFacts,
  claimToUnknown,
  claimTransition,
  code,
  fpBytes,
  LEASE_EXPIRED,
  ms,
} from './fragments.js';
import { type Int8, statement } from './statement.js';

/**
 * What the claim statements (`claim`, `peek`) answer per key: the row as a replay needs it, times
 * in whole milliseconds, whether this statement acquired it, and whether it was claimable.
 */
export type ClaimAnswerRow = {
  key: string;
  status: LedgerStatus;
  epoch: number;
  fingerprint: string;
  lease_expires_ms: Int8 | null;
  result: unknown;
  error: RecordedError | null;
  completed_ms: Int8 | null;
  expires_ms: Int8 | null;
  /** The claim transition this statement made (null when it made none). */
  transition: string | null;
  acquired: boolean;
  claimable: boolean;
  /** Of a live lease: the milliseconds until it expires. */
  retry_after_ms: Int8 | null;
  /** The database time of the statement. */
  at_ms: Int8;
};

/**
 * The transition the upsert made, by name: its insert makes `claimed` at epoch 1 (which no
 * update of a row makes: an update raises the epoch), its update the one it chose and wrote
 * (claimTransition). Not the `last_transition` column alone: an insert leaves it null by design
 * (the record of transitions holds it, migration 0008), and a key the full claim inserted came
 * back with no transition the outcome mapping could read.
 */
const made = `case when epoch = 1 then 'claimed' else last_transition end as made`;

/**
 * The claim, for one key or a batch of distinct keys (arrays of equal length): one statement.
 * `cur` reads the rows; a key whose row is not claimable (a replay, a conflict, a live lease)
 * writes nothing at all. The others go through the upsert, which arbitrates: of any number of
 * concurrent claimers of a key exactly one gets its row back from `ins`. The upsert's WHERE
 * re-checks claimability on the newest row version, so a stale snapshot never wins twice.
 * Rows are inserted in key order so concurrent batches lock in the same order. The claimable
 * predicate and the choice of transition are generated from the transition table (TRANSITIONS).
 * Params (arrays): 1 key, 2 namespace, 3 resource_key, 4 version, 5 operation, 6 fingerprint,
 * 7 lease_ms, 8 retention_ms, 9 downstream, 10 owner, 11 job_id, 12 queue, 13 task_id,
 * 14 step_id; 15 clock offset ms; 16 facts (JSON text or null, see claimFactsText).
 */
export const claim = statement<ClaimBatch, ClaimAnswerRow>({
  text: ({ ledger }) => {
    const N = CLAIM_NOW;
    const toUnknown = claimToUnknown();
    const transition = claimTransition();
    return `with i as (select * from ${CLAIM_INPUT}),
cur as (select l.*, ${fpBytes('i.fingerprint')} as want from ${ledger} l join i on l.key = i.key),
ins as (
  ${insertClaimed(ledger)}
  from i
  where not exists (select 1 from cur c where c.key = i.key and not ${claimable('c', 'c.want', N)})
  order by i.key
  on conflict (key) do update set
    status = case when ${toUnknown} then 'unknown' else 'locked' end,
    epoch = l.epoch + 1,
    lease_owner = case when ${toUnknown} then null else excluded.lease_owner end,
    lease_expires_at = case when ${toUnknown} then null else excluded.lease_expires_at end,
    last_transition = ${transition},
    error = case when ${toUnknown}
      then jsonb_build_object('code', ${LEASE_EXPIRED}, 'message',
        'the attempt holding epoch ' || l.epoch || ' lost its lease before recording an outcome; the downstream has no idempotent API or lookup')
      else null end,
    operation = excluded.operation,
    fingerprint = excluded.fingerprint,
    downstream = case when l.status = 'locked' then l.downstream else excluded.downstream end,
    retention_ms = excluded.retention_ms, sweep_after = excluded.sweep_after,
    result = null, retryable = null, completed_at = null, expires_at = null,
    job_id = excluded.job_id, queue = excluded.queue,
    task_id = coalesce(excluded.task_id, l.task_id), step_id = coalesce(excluded.step_id, l.step_id),
    updated_at = excluded.updated_at, claimed_at = null, claim_transition = null,
    transitions = ${append('l.transitions', code(transition), 'l.epoch + 1', N, `${claimFacts('excluded', 'excluded.lease_owner')}, 'c', case when ${toUnknown} then ${LEASE_EXPIRED} end`)}
  where ${claimable('l', 'excluded.fingerprint', N)}
  returning key, status, epoch, fingerprint, lease_expires_at, result, error, completed_at, expires_at, updated_at, retention_ms, ${made}
)
select ${claimAnswer('ins', 'ins.made')}, true as acquired, true as claimable, null::int8 as retry_after_ms, ${ms('updated_at')} as at_ms from ins
union all
select ${claimAnswer('c')}, false, ${claimable('c', 'c.want', N)},
  case when c.status = 'locked' then greatest(0, ceil(extract(epoch from (c.lease_expires_at - ${N})) * 1000))::int8 end,
  ${ms(N)}
from cur c where not exists (select 1 from ins where ins.key = c.key)`;
  },
  values: claimValues,
});
