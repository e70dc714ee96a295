import { TRANSITION_CODES } from '../recorded-transition.js';
import { TRANSITIONS } from '../transitions.js';
import { append, ms, now } from './fragments.js';
import { type Clock, type Int8, type OperatorColumns, statement } from './statement.js';

/**
 * An operator's settling of an `unknown` record: committed (transition `resolved_committed`, the
 * result recorded) or not (`resolved_not_committed`, the key claimable again); any other state
 * matches no row. Params: 1 key, 2 result json or null, 3 clock offset, 4 committed, 5 actor, 6 reason.
 */
export const resolve = statement<
  { key: string; resultJson: string | null; committed: boolean } & Clock & OperatorColumns,
  { epoch: number; at_ms: Int8 }
>({
  text: ({ ledger }) => `update ${ledger} set
  status = case when $4::boolean then '${TRANSITIONS.resolved_committed.to}' else '${TRANSITIONS.resolved_not_committed.to}' end,
  result = case when $4::boolean then $2::jsonb else null end,
  last_transition = null,
  epoch = epoch + 1,
  completed_at = null, expires_at = null, updated_at = ${now(3)},
  transitions = ${append('transitions', `case when $4::boolean then ${TRANSITION_CODES.resolved_committed} else ${TRANSITION_CODES.resolved_not_committed} end`, 'epoch + 1', now(3), `'a', $5::text, 'r', $6::text`)}
where key = $1 and status = 'unknown' returning epoch, ${ms('updated_at')} as at_ms`,
  values: (p) => [p.key, p.resultJson, p.clockOffsetMs, p.committed, p.actorId, p.reason],
});
