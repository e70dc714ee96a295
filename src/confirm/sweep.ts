import { confirmationEvent, settledEvent } from '../audit/confirmation-event.js';
import type { AuditEmitter } from '../audit/emitter.js';
import type { ConfirmationStore } from './confirmation-store.js';

/** What a sweep did to the confirmation requests. */
export type ConfirmationSweepResult = {
  /** Answered or timed-out requests of operations the ledger no longer holds, deleted. */
  deleted: number;
  /**
   * Such requests kept because one of their audit events is not stored yet; with an `emitter`
   * their events were sent again, and a later run deletes them.
   */
  pending: number;
};

/**
 * Deletes the confirmation requests of swept operations in bounded batches: an answer belongs to
 * its operation's record, so once the record has gone (its retention ran out) a re-run asks
 * again. A request waiting for an answer is never deleted, and none before its events are stored.
 */
export async function sweepConfirmations(
  store: ConfirmationStore,
  opts: { batchSize: number; maxBatches: number; emitter?: AuditEmitter },
): Promise<ConfirmationSweepResult> {
  let deleted = 0;
  let pending = 0;
  let after = '0';
  for (let batch = 0; batch < opts.maxBatches; batch++) {
    const page = await store.sweepPage(opts.batchSize, after);
    deleted += page.deleted;
    pending += page.pending.length;
    for (const c of page.pending) {
      opts.emitter?.record(confirmationEvent('requested', c));
      const settled = settledEvent(c);
      if (settled) opts.emitter?.record(settled);
    }
    if (page.scanned < opts.batchSize || !page.next) break;
    after = page.next;
  }
  return { deleted, pending };
}
