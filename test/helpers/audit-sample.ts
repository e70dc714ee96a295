import { type AuditEvent, eventIdFor } from '../../src/audit/audit-event.js';

/** A valid outcome event of an agent's tool call, its id derived from `source` and `id`. */
export function sampleAuditEvent(source: string, id: string): AuditEvent {
  return {
    eventId: eventIdFor(source, id),
    actorType: 'agent',
    actorId: 'assistant',
    action: 'tool.send_mail',
    resourceType: 'mailbox',
    resourceId: `mb_${id}`,
    decision: 'allow',
    createdAt: new Date().toISOString(),
    phase: 'outcome',
  };
}

/**
 * The event `npm run bench:audit` emits (bench/audit.ts), number `i`: a tool decision with a task,
 * an operation key and details that hold an e-mail address (so redacted, with a receipt).
 */
export function benchToolEvent(eventId: string, taskId: string, i: number): AuditEvent {
  return {
    eventId,
    taskId,
    operationId: `acme%2Fsearch:q%3A${i}:v1`,
    actorType: 'agent',
    actorId: 'assistant-7',
    action: 'tool.search',
    resourceType: 'index',
    resourceId: 'products',
    decision: i % 10 === 0 ? 'deny' : 'allow',
    reasonCode: 'policy.ok',
    createdAt: new Date().toISOString(),
    seq: i,
    phase: 'intent',
    epoch: 1,
    details: {
      query: `red shoes size ${i % 45}`,
      results: i % 50,
      user: { email: `user${i}@example.com`, plan: 'pro' },
    },
  };
}
