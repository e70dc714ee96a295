/**
 * The redactors never change the event they are given: the emitter's (`auditRedactor`), the
 * writer's (`storeRedactor`) and the grammars alone (`fieldGrammarRedactor`). An event that needs
 * nothing is answered as it is, without a copy; one that needs a change is answered as a copy.
 * Every input here is frozen through and through, so a write to it throws.
 */
import { describe, expect, it } from 'vitest';
import { type AuditEvent, eventIdFor } from '../../src/audit/audit-event.js';
import { auditRedactor, fieldGrammarRedactor, storeRedactor } from '../../src/audit/redact-event.js';
import { defineRedactionPolicy } from '../../src/redaction/define-policy.js';

const policy = defineRedactionPolicy({
  version: 'input-test',
  hmacKeys: [{ id: 'k1', secret: 'a-redactor-input-test-key-of-32-bytes-or-more' }],
  details: { 'tool.lookup': ['region', 'customer'] },
});

function frozen<T>(v: T): T {
  if (typeof v === 'object' && v !== null) {
    for (const x of Object.values(v)) frozen(x);
    Object.freeze(v);
  }
  return v;
}

const base: AuditEvent = {
  eventId: eventIdFor('redactor-input', 1),
  actorType: 'system',
  actorId: 'worker:host:1',
  action: 'idempotency.claimed',
  resourceType: 'idempotency_key',
  resourceId: 'mail:order-1:v1',
  operationId: 'mail:order-1:v1',
  decision: 'allow',
  createdAt: '2026-12-04T10:00:00.000Z',
  phase: 'intent',
  seq: 0,
  epoch: 1,
  queue: 'mail',
  operation: 'mail.send',
  attemptsMade: 0,
  attemptsStarted: 1,
  stalledCounter: 0,
  afterStateRef: 'ledger:locked@1',
};

const cases: [what: string, event: AuditEvent, changes: boolean][] = [
  ['a system event that needs nothing', base, false],
  ['a task id that is an e-mail address', { ...base, taskId: 'erin.input@example.com' }, true],
  ['counters out of their bounds', { ...base, attemptsMade: 1.5, epoch: 0 } as AuditEvent, true],
  ['a numeric job id', { ...base, jobId: 42 } as unknown as AuditEvent, true],
  [
    'a tool decision with details',
    {
      ...base,
      actorType: 'agent',
      actorId: 'agent-1',
      action: 'tool.lookup',
      resourceType: 'tool',
      resourceId: 'lookup',
      details: { region: 'eu', customer: 'erin.input@example.com', note: { deep: ['x'] } },
    },
    true,
  ],
];

describe('the redactors never change the event they are given', () => {
  for (const [name, make] of [
    ['auditRedactor', auditRedactor],
    ['storeRedactor', storeRedactor],
    ['fieldGrammarRedactor', fieldGrammarRedactor],
  ] as const) {
    it.each(cases)(`${name}: %s`, (_what, event, changes) => {
      const before = structuredClone(event);
      const input = frozen(structuredClone(event));
      const out = make(policy)(input);
      expect(input).toEqual(before);
      if (!changes) expect(out).toBe(input);
      // The grammars alone leave details as they are: every other change is made on a copy.
      const detailsOnly = name === 'fieldGrammarRedactor' && event.details !== undefined;
      if (changes && !detailsOnly) expect(out).not.toBe(input);
      const { details: _details, ...fields } = out;
      expect(JSON.stringify(detailsOnly ? fields : out)).not.toContain('erin.input@example.com');
    });
  }
});
