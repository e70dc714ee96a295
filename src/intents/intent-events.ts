import { type AuditEvent, eventIdFor } from '../audit/audit-event.js';
import type { IntentRow } from './intent-store.js';

/**
 * What happened to an intent that the trail records:
 * - `accepted`: the intent is durable (its row committed), before any attempt;
 * - `readded`: its job vanished from Redis before any claim (no ledger row, no job) and was
 *   added again from the recorded intent (`n`: the how-many-th time).
 */
export type IntentFact = { kind: 'accepted'; deferred: boolean } | { kind: 'readded'; n: number };

/**
 * The audit event of an intent fact, by the system actor `actorId` (the producer, or the relay).
 * Its id is made from the key and the fact, so the same acceptance or re-add recorded twice (a
 * relay run repeated, the producer and a relay both) is stored once.
 */
export function intentEvent(row: IntentRow, fact: IntentFact, actorId: string): AuditEvent {
  const event: AuditEvent = {
    eventId: eventIdFor(row.key, 'intent', fact.kind, fact.kind === 'readded' ? fact.n : 0),
    actorType: 'system',
    actorId,
    action: fact.kind === 'accepted' ? 'idempotency.intent_accepted' : 'idempotency.intent_readded',
    resourceType: 'idempotency_intent',
    resourceId: row.key,
    operation: row.operation,
    decision: 'allow',
    createdAt: new Date().toISOString(),
    phase: 'intent',
    jobId: row.jobId,
    queue: row.queue,
    details: fact.kind === 'accepted' ? { deferred: fact.deferred } : { readds: fact.n },
  };
  if (row.taskId) event.taskId = row.taskId;
  return event;
}
