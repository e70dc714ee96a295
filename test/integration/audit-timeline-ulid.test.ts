import { randomBytes } from 'node:crypto';
import type pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { type AuditEvent, eventIdFor } from '../../src/audit/audit-event.js';
import { AuditStore } from '../../src/audit/audit-store.js';
import { auditRedactor } from '../../src/audit/redact-event.js';
import { timeline } from '../../src/audit/timeline.js';
import type { PostgresLedger } from '../../src/ledger/postgres-ledger.js';
import { defineRedactionPolicy } from '../../src/redaction/define-policy.js';
import { ulid } from '../fixtures/personal-corpus.js';
import { TestContext } from '../helpers/context.js';

const t = new TestContext('audit-timeline-ulid');
let pool: pg.Pool;
let ledger: PostgresLedger;
const policy = defineRedactionPolicy({ version: 'ulid-1', hmacKeys: [{ id: 'k1', secret: randomBytes(32) }] });

beforeAll(async () => {
  await t.setup();
  pool = t.pool();
  ledger = t.ledger();
});
afterAll(async () => {
  await ledger.close();
  await pool.end();
  await t.teardown();
});

it('timeline finds a task by the ULID the application used, stored in clear', async () => {
  const taskId = ulid();
  const redact = auditRedactor(policy);
  const events: AuditEvent[] = ['tool.search', 'tool.charge'].map((action, i) =>
    redact({
      eventId: eventIdFor('ulid', taskId, i),
      taskId,
      actorType: 'agent',
      actorId: 'assistant-7',
      action,
      resourceType: 'payment',
      resourceId: 'pay_1',
      decision: 'allow',
      createdAt: new Date(Date.now() + i).toISOString(),
      phase: 'intent',
      seq: i,
    }),
  );
  const store = new AuditStore(pool, t.schema, policy);
  expect((await store.writeBatch(events)).inserted).toBe(2);
  const stored = await pool.query(`select task_id from ${t.schema}.audit_events`);
  expect(stored.rows.map((r) => r.task_id)).toEqual([taskId, taskId]);
  const story = await timeline({ taskId }, { store, ledger });
  expect(story.events.map((e) => e.action)).toEqual(['tool.search', 'tool.charge']);
  await store.close();
});
