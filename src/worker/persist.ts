import { isInfraError } from '../db/unreachable.js';
import { IllegalTransitionError } from '../errors/errors.js';
import type { AttemptLedger } from '../ledger/postgres-ledger.js';
import type { LedgerRecord, LedgerStatus } from '../ledger/types.js';
import { LedgerUnreachableError, ledgerBackoff } from './ledger-unreachable.js';
import { pause } from './pause.js';

/**
 * The signal a write stops retrying on, or what holds it (a lease keeper): read only when a write
 * failed, since making a keeper's signal costs an AbortController per attempt.
 */
export type SignalSource = AbortSignal | { readonly signal: AbortSignal };

const signalOf = (source: SignalSource): AbortSignal => (source instanceof AbortSignal ? source : source.signal);

/** How a write that landed although its answer was lost is recognised, and what it returns then. */
export type Landed<T> = { key: string; epoch: number; status: LedgerStatus; value: (rec: LedgerRecord) => T };

/**
 * A ledger write made while the attempt holds its lease, asked again with backoff while the
 * lease holds (`source`'s signal fires when the keeper cannot keep it) and for at most two leases; then a
 * {@link LedgerUnreachableError}, and the job is deferred. A write that landed although its
 * answer was lost meets its own state on the retry: `landed` reads it from the record.
 */
export async function persist<T>(
  ledger: AttemptLedger,
  leaseMs: number,
  what: string,
  source: SignalSource,
  write: () => Promise<T>,
  landed?: Landed<T>,
): Promise<T> {
  const deadline = performance.now() + 2 * leaseMs;
  let failedBefore = false;
  for (;;) {
    try {
      const out = await write();
      ledgerBackoff.reset();
      return out;
    } catch (err) {
      if (failedBefore && landed && err instanceof IllegalTransitionError) {
        const rec = await ledger.get(landed.key).catch((e: unknown) => {
          if (isInfraError(e)) throw new LedgerUnreachableError(what, e);
          throw e;
        });
        if (rec && rec.epoch === landed.epoch && rec.status === landed.status) return landed.value(rec);
      }
      if (!isInfraError(err)) throw err;
      failedBefore = true;
      const signal = signalOf(source);
      const left = deadline - performance.now();
      if (signal.aborted || left <= 0) throw new LedgerUnreachableError(what, err);
      await pause(Math.min(left, Math.max(25, leaseMs / 4), ledgerBackoff.next()), signal);
    }
  }
}

/** A completion that landed although its answer was lost: its receipt, read from the record. */
export function landedCompletion(key: string, epoch: number): Landed<{ at: Date; result: unknown }> {
  return {
    key,
    epoch,
    status: 'completed',
    value: (rec) => ({ at: rec.completedAt ?? rec.updatedAt, result: rec.result }),
  };
}

/** A fail, release or markUnknown that landed although its answer was lost. */
export function landedAs(key: string, epoch: number, status: LedgerStatus): Landed<{ at: Date }> {
  return { key, epoch, status, value: (rec) => ({ at: rec.updatedAt }) };
}
