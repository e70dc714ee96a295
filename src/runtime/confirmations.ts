import type { Queue } from 'bullmq';
import type pg from 'pg';
import type { AuditStore } from '../audit/audit-store.js';
import { type AnswerResult, answerConfirmation, listConfirmations } from '../confirm/answer.js';
import type { Confirmation } from '../confirm/types.js';
import type { RedactionPolicy } from '../redaction/define-policy.js';

/**
 * `idem.confirmations`: the runtime's group of methods on confirmation requests. Apart from the
 * runtime because an answer is a whole step of its own (audited, then the parked jobs woken), and
 * the runtime only lends it its pool, store, policy and queues.
 */

/**
 * Confirmation requests (`ctx.confirm()`): list them, answer one. An answer is audited as the
 * person's decision and wakes the parked jobs through the runtime's queues.
 */
export type RuntimeConfirmations = {
  /**
   * @example
   * for (const c of await idem.confirmations.list({ pending: true })) console.log(c.id, c.reason);
   */
  list(options?: { pending?: boolean; limit?: number; after?: string }): Promise<Confirmation[]>;
  /**
   * @example
   * await idem.confirmations.answer('cf-12', { approve: true, actor: 'alice', comment: 'checked the invoice' });
   */
  answer(id: string, answer: { approve: boolean; actor: string; comment?: string }): Promise<AnswerResult>;
};

/** What the confirmations use of the runtime's parts. */
export type ConfirmationParts = {
  pool: pg.Pool;
  schema: string;
  store: AuditStore;
  /** The trail's policy: `answered_by` holds the actor as the trail tells it, the same ref the store's event holds. */
  policy: RedactionPolicy;
  queue: (name: string) => Queue;
};

export function runtimeConfirmations(parts: ConfirmationParts): RuntimeConfirmations {
  const { pool, schema } = parts;
  return {
    list: (opts = {}) => listConfirmations({ pool, schema, ...opts }),
    answer: (id, a) =>
      answerConfirmation({
        pool,
        schema,
        id,
        approve: a.approve,
        actor: a.actor,
        ...(a.comment === undefined ? {} : { comment: a.comment }),
        auditStore: parts.store,
        policy: parts.policy,
        via: 'library',
        queue: parts.queue,
      }),
  };
}
