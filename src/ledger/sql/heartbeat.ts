import { FENCED, now } from './fragments.js';
import { type Clock, statement } from './statement.js';

/**
 * The lease of the attempt holding the epoch, extended from the database time.
 * Params: 1 key, 2 epoch, 3 lease_ms, 4 clock offset.
 */
export const heartbeat = statement<
  { key: string; epoch: number; leaseMs: number } & Clock,
  { lease_expires_at: Date; at: Date }
>({
  text: ({ ledger }) => `update ${ledger} set lease_expires_at = ${now(4)} + $3::int8 * interval '1 millisecond'
where ${FENCED} returning lease_expires_at, ${now(4)} as at`,
  values: (p) => [p.key, p.epoch, p.leaseMs, p.clockOffsetMs],
});
