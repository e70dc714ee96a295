import { IllegalTransitionError, InvalidInputError } from '../errors/errors.js';
import type { PostgresLedger } from '../ledger/postgres-ledger.js';
import type { KeyLike, LedgerStatus, ResolveOutcome, Transition, WriteReceipt } from '../ledger/types.js';
import { cleanReason } from '../redaction/clean-reason.js';
import type { AuditEvent } from './audit-event.js';
import type { AuditStore } from './audit-store.js';
import { type EventSource, recordedTransitionEvent } from './derive.js';
import { isIdentifier } from './identifier-grammar.js';

/** Longest actor id an audit event takes. */
const MAX_ACTOR_LENGTH = 200;

export type OperatorActionOptions = {
  /** Who acts: kept with the transition in the ledger and in its `user` audit event. */
  actor: string;
  /** Why: one line, scanned by the default redaction policy and bounded (see `cleanReason`) before it is kept. */
  reason: string;
  /**
   * Writes the event to `audit_events` at once. Without it (or when that write fails) the event
   * is written by the next audit backfill, from the ledger's record of the transition: the same
   * event under the same id, so it is stored once either way.
   */
  store?: AuditStore;
  /** Which tool acts, in the event's `details.via`. @defaultValue `'library'` */
  via?: Exclude<EventSource, 'backfill'>;
};

/** What an operator action did: the ledger's receipt and its audit event. */
export type OperatorActionResult = WriteReceipt & {
  event: AuditEvent;
  /** True when `store` holds the event now; otherwise the backfill writes it. */
  stored: boolean;
  /** Why the store did not take it, when a store was given. */
  storeError?: unknown;
};

/**
 * Evicts a key whatever its state, so its next claim executes again, and fences any current
 * holder: `ledger.invalidate()` with who and why. The ledger's statement records the transition
 * with the actor and the reason, so its `user` audit event exists once the backfill has run
 * even if this process dies right after; with `store` it is written at once.
 *
 * @example
 * const r = await invalidateKey(ledger, key, { actor: 'alice', reason: 'refund issued twice', store });
 * // r.event.actorType === 'user'; r.stored === true
 */
export async function invalidateKey(
  ledger: PostgresLedger,
  key: KeyLike,
  options: OperatorActionOptions,
): Promise<OperatorActionResult & { previousStatus: LedgerStatus }> {
  const by = operatorFacts(options);
  const receipt = await ledger.invalidate(key, keptFacts(by));
  return { ...receipt, ...(await recordEvent(ledger, receipt, 'invalidated', by, options)) };
}

/**
 * Settles an `unknown` record: `ledger.resolve()` with who and why, audited like
 * {@link invalidateKey}. Any state other than `unknown` is refused (`IllegalTransitionError`).
 *
 * @example
 * await resolveKey(ledger, key, { committed: false }, { actor: 'bob', reason: 'no charge at the provider', store });
 */
export async function resolveKey(
  ledger: PostgresLedger,
  key: KeyLike,
  outcome: ResolveOutcome,
  options: OperatorActionOptions,
): Promise<OperatorActionResult> {
  const by = operatorFacts(options);
  const receipt = await ledger.resolve(key, outcome, keptFacts(by));
  const transition = outcome.committed ? 'resolved_committed' : 'resolved_not_committed';
  return { ...receipt, ...(await recordEvent(ledger, receipt, transition, by, options)) };
}

/** The actor, checked, and the reason as it may be kept. */
function operatorFacts(options: OperatorActionOptions): { actorId: string; reason: string } {
  const actor = options.actor;
  if (typeof actor !== 'string' || actor.length === 0 || actor.length > MAX_ACTOR_LENGTH) {
    throw new InvalidInputError('operator action', [
      { path: 'actor', message: `must be a non-empty string of at most ${MAX_ACTOR_LENGTH} characters` },
    ]);
  }
  return { actorId: actor, reason: cleanReason(String(options.reason ?? '')) };
}

/**
 * What the ledger's record of the transition keeps in clear: the actor only when it passes the
 * identifier grammar (any other actor is told only by the audit event, whose store replaces it
 * by a keyed ref), and the reason as cleaned.
 */
function keptFacts(by: { actorId: string; reason: string }): { actorId?: string; reason: string } {
  return isIdentifier(by.actorId, MAX_ACTOR_LENGTH) ? by : { reason: by.reason };
}

/** The event of the transition just made, read back from its record; written to `store` when given. */
async function recordEvent(
  ledger: PostgresLedger,
  receipt: WriteReceipt,
  transition: Transition,
  by: { actorId: string },
  options: OperatorActionOptions,
): Promise<{ event: AuditEvent; stored: boolean; storeError?: unknown }> {
  const record = await ledger.get(receipt.key);
  const event =
    record && recordedTransitionEvent(record, receipt.epoch, transition, by.actorId, options.via ?? 'library');
  if (!event) {
    // The row was deleted between the write and the read: its record of transitions went with it.
    throw new IllegalTransitionError({ key: receipt.key, from: record?.status ?? null, action: `audit ${transition}` });
  }
  if (!options.store) return { event, stored: false };
  try {
    const written = await options.store.writeBatch([event]);
    return written.deadLettered === 0
      ? { event, stored: true }
      : { event, stored: false, storeError: new Error('the event was refused and dead-lettered') };
  } catch (err) {
    return { event, stored: false, storeError: err };
  }
}
