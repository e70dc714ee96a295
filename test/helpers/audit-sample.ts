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
