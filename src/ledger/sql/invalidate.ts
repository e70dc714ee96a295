import type { LedgerStatus } from '../types.js';
import { append, code, ms, now } from './fragments.js';
import { type Clock, type Int8, type OperatorColumns, statement } from './statement.js';

/**
 * An operator's eviction of a key whatever its state: the record becomes `invalidated` and any
 * holder is fenced (epoch + 1); who and why are recorded with the transition.
 * Params: 1 key, 2 clock offset, 3 actor, 4 reason.
 */
export const invalidate = statement<
  { key: string } & Clock & OperatorColumns,
  { epoch: number; previous_status: LedgerStatus; at_ms: Int8 }
>({
  text: ({ ledger }) => `with prev as (select key, status from ${ledger} where key = $1 for update)
update ${ledger} t set status = 'invalidated', epoch = t.epoch + 1, result = null, retryable = null,
  lease_owner = null, lease_expires_at = null, last_transition = null,
  expires_at = null, updated_at = ${now(2)},
  transitions = ${append('t.transitions', code('invalidated'), 't.epoch + 1', now(2), `'p', prev.status, 'a', $3::text, 'r', $4::text`)}
from prev where t.key = prev.key returning t.epoch, prev.status as previous_status, ${ms('t.updated_at')} as at_ms`,
  values: (p) => [p.key, p.clockOffsetMs, p.actorId, p.reason],
});
