import { append, code, FENCED, ms, now } from './fragments.js';
import { type Clock, type Int8, statement } from './statement.js';

/** A holder's outcome other than a completion: a failure, a release, a move to unknown. */
export type FinishParams = {
  key: string;
  epoch: number;
  errorJson: string | null;
  status: string;
  transition: string;
  retryable: boolean | null;
  reasonCode: string | null;
} & Clock;

/**
 * The outcome of the attempt holding the epoch other than a completion (transitions `failed`,
 * `failed_retryable`, `released`, `marked_unknown`), fenced by its epoch.
 * Params: 1 key, 2 epoch, 3 error json, 4 clock offset, 5 new status, 6 transition, 7 retryable,
 * 8 the reason code of a release that records no error (the record's `c` fact).
 */
export const finish = statement<FinishParams, { at_ms: Int8 }>({
  text: ({ ledger }) => `update ${ledger} set status = $5, error = $3::jsonb, retryable = $7, result = null,
  lease_owner = null, lease_expires_at = null, last_transition = null,
  expires_at = null,
  updated_at = ${now(4)},
  transitions = ${append('transitions', code('$6::text'), 'epoch', now(4), `'c', coalesce($3::jsonb->>'code', $8::text)`)}
where ${FENCED} returning ${ms('updated_at')} as at_ms`,
  values: (p) => [p.key, p.epoch, p.errorJson, p.clockOffsetMs, p.status, p.transition, p.retryable, p.reasonCode],
});
