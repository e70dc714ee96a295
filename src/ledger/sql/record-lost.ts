import { CLAIM_INPUT, CLAIM_NOW, type ClaimBatch, claimValues, sweepAfter } from './claim-input.js';
import { append, code, entry, fpBytes, ms } from './fragments.js';
import { type Int8, statement } from './statement.js';

/**
 * The write-back of a lost record (transition `record_lost`): the attempt holding epoch $17
 * found its row gone, or at a lower epoch (a restore, a promoted asynchronous standby). The row
 * comes back `unknown` at that epoch with the error $18 (code `IDEMPOTENCY_RECORD_LOST`), so a
 * retry or a duplicate job meets it and does not run; a row already at that epoch or above
 * (another attempt wrote it) is left alone and no row is returned. The record of transitions
 * starts again with this one when the row was gone (the rest went with it).
 * Params: 1..16 as the claim's (one key); 17 epoch; 18 error json.
 */
export const recordLost = statement<ClaimBatch & { epoch: number; errorJson: string }, { at_ms: Int8 }>({
  text: ({ ledger }) => {
    const N = CLAIM_NOW;
    return `insert into ${ledger} as l (key, namespace, resource_key, version, operation, fingerprint, status, epoch,
    downstream, retention_ms, job_id, queue, task_id, step_id, updated_at, error, transitions, sweep_after)
  select i.key, i.namespace, i.resource_key, i.version, i.operation, ${fpBytes('i.fingerprint')}, 'unknown', $17::int4,
    i.downstream, i.retention_ms, i.job_id, i.queue, i.task_id, i.step_id, ${N}, $18::jsonb,
    ${entry(code('record_lost'), '$17::int4', ms(N), `'o', i.owner, 'j', i.job_id, 'q', i.queue, 'k', i.task_id, 'c', $18::jsonb->>'code'`)},
    ${sweepAfter('i')}
  from ${CLAIM_INPUT}
  on conflict (key) do update set status = 'unknown', epoch = excluded.epoch, error = excluded.error,
    lease_owner = null, lease_expires_at = null, last_transition = null, result = null, retryable = null,
    completed_at = null, expires_at = null, claimed_at = null, claim_transition = null,
    operation = excluded.operation, fingerprint = excluded.fingerprint, downstream = excluded.downstream,
    retention_ms = excluded.retention_ms, job_id = excluded.job_id, queue = excluded.queue,
    task_id = coalesce(excluded.task_id, l.task_id), step_id = coalesce(excluded.step_id, l.step_id),
    updated_at = excluded.updated_at,
    transitions = ${append('l.transitions', code('record_lost'), 'excluded.epoch', N, `'j', excluded.job_id, 'q', excluded.queue, 'k', excluded.task_id, 'c', excluded.error->>'code'`)}
  where l.epoch < excluded.epoch
  returning ${ms('updated_at')} as at_ms`;
  },
  values: (p) => [...claimValues(p), p.epoch, p.errorJson],
});
