import type { ClaimAnswerRow } from './claim.js';
import { claimAnswer, claimable, fpBytes, ms, now } from './fragments.js';
import { type Clock, statement } from './statement.js';

/**
 * The claim's read: each key's row and whether it is claimable, without writing. A row that is
 * not claimable (a replay, a conflict, a live lease, unknown) is answered from here alone;
 * read-only, it costs no commit. Params: 1 keys, 2 fingerprints; 3 clock offset.
 */
export const peek = statement<{ keys: readonly string[]; fingerprints: readonly string[] } & Clock, ClaimAnswerRow>({
  text: ({ ledger }) => `select ${claimAnswer('l')}, false as acquired,
  ${claimable('l', fpBytes('i.want'), now(3))} as claimable,
  case when l.status = 'locked' then greatest(0, ceil(extract(epoch from (l.lease_expires_at - ${now(3)})) * 1000))::int8 end
    as retry_after_ms,
  ${ms(now(3))} as at_ms
from unnest($1::text[], $2::text[]) as i(key, want) join ${ledger} l on l.key = i.key`,
  values: (p) => [p.keys, p.fingerprints, p.clockOffsetMs],
});
