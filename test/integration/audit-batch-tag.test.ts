import { deflateRawSync } from 'node:zlib';
import type { Job, Queue } from 'bullmq';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AuditEvent, eventIdFor } from '../../src/audit/audit-event.js';
import { AuditStore } from '../../src/audit/audit-store.js';
import { AUDIT_JOB_NAME, type AuditBatchData, auditBatchJob } from '../../src/audit/batch-codec.js';
import { batchTag } from '../../src/audit/batch-tag.js';
import { AuditEmitter, type AuditRedactor } from '../../src/audit/emitter.js';
import { auditRedactor } from '../../src/audit/redact-event.js';
import { defineRedactionPolicy, withValueScanner } from '../../src/redaction/define-policy.js';
import type { RedactionPolicyInput } from '../../src/redaction/policy-schema.js';
import { verifyRef } from '../../src/redaction/refs.js';
import { DEFAULT_VALUE_SCANNER } from '../../src/scanners/value-scanner.js';
import { bull } from '../helpers/bullmq.js';
import { TestContext, waitFor } from '../helpers/context.js';

/*
 * The writer redacts every event again before Postgres, whoever made it. A batch that an emitter
 * redacted with the library's own redactor, under the writer's policy and key, is tagged and
 * stored without that second pass; anything else (a changed payload, another policy under the same
 * key, another key, a custom redactor, a forged tag) is redacted again. These tests count the
 * plain text that reaches the table.
 */

const t = new TestContext('audit-batch-tag');
const b = bull(t);
let pool: pg.Pool;

beforeAll(async () => {
  await t.setup();
  pool = t.pool(4);
});
afterAll(async () => {
  await pool.end();
  await t.teardown();
});

const SECRET = 'an-audit-batch-tag-hmac-key-of-32-bytes-or-more';
const input: RedactionPolicyInput = {
  version: 'tag-test',
  hmacKeys: [{ id: 'k1', secret: SECRET }],
  details: { 'tool.search': ['query'] },
};
/** The same definition compiled twice: as an emitting worker and the writer's process each would. */
const emitterPolicy = defineRedactionPolicy(input);
const writerPolicy = defineRedactionPolicy(input);
const EMAIL = 'alice.tagtest@example.com';

function event(taskId: string, i: number): AuditEvent {
  return {
    eventId: eventIdFor('batch-tag', taskId, i),
    actorType: 'agent',
    actorId: 'agent-1',
    action: 'tool.search',
    resourceType: 'tool',
    resourceId: 'search',
    decision: 'allow',
    createdAt: new Date().toISOString(),
    phase: 'intent',
    taskId,
    details: { query: `find ${i}` },
  };
}

/** Rows of the task (by the stored id), and rows anywhere whose text holds `EMAIL`. */
async function stored(taskId: string): Promise<{ rows: number; plain: number }> {
  const rows = (await t.query(`select count(*)::int as n from ${t.schema}.audit_events where task_id = $1`, [taskId]))
    .rows[0]?.n;
  const plain = (
    await t.query(`select count(*)::int as n from ${t.schema}.audit_events e where e::text like $1`, [`%${EMAIL}%`])
  ).rows[0]?.n;
  return { rows: Number(rows), plain: Number(plain) };
}

/** A writer under the writer's policy, and the results of the jobs it completed. */
function writer(queueName: string) {
  const results: { tagHeld?: boolean; inserted: number }[] = [];
  const w = b.auditWriter(queueName, pool, { redactionPolicy: writerPolicy });
  w.on('completed', (_job: Job, r) => results.push(r));
  return { results, close: () => w.close() };
}

/** An emitter on `queue`, in batches of 10, redacting with `redact`. */
const emitterOn = (queue: Queue, redact: AuditRedactor) =>
  new AuditEmitter({ queue, pool, schema: t.schema, redact, maxBatch: 10 });

describe('audit batch tags', () => {
  it("an emitter using the library's redactor tags its batches; a writer of the same policy stores them without a second pass", async () => {
    const queue = b.queue('tag-ok');
    const { results, close } = writer('tag-ok');
    const emitter = emitterOn(queue, auditRedactor(emitterPolicy));
    for (let i = 0; i < 30; i++) emitter.record(event(EMAIL, i));
    await emitter.flush();
    await waitFor(() => results.length === 3, 'three batches written');
    expect(results.map((r) => r.tagHeld)).toEqual([true, true, true]);
    // The emitter made the email a reference; the writer's pass would have left it so.
    const rows = (await t.query(`select distinct task_id from ${t.schema}.audit_events`)).rows;
    expect(rows).toHaveLength(1);
    expect(verifyRef(rows[0]?.task_id, EMAIL, writerPolicy)).toBe(true);
    expect((await stored(rows[0]?.task_id)).rows).toBe(30);
    expect((await stored(rows[0]?.task_id)).plain).toBe(0);
    await emitter.close();
    await close();
    await queue.close();
  });

  it('a tagged batch whose payload was changed in the queue is redacted again', async () => {
    const queue = b.queue('tag-changed');
    const { results, close } = writer('tag-changed');
    const redact = auditRedactor(emitterPolicy);
    const honest = await auditBatchJob([redact(event('task-honest', 0))]);
    const tag = batchTag(emitterPolicy, 1, honest.data.payload);
    expect(tag).toMatch(/^k1\./);
    // The same count and tag on a payload that carries the email in clear.
    const forged = [{ ...redact(event('task-forged', 1)), taskId: EMAIL }];
    const data: AuditBatchData = {
      encoding: 'deflate-raw',
      count: 1,
      payload: deflateRawSync(JSON.stringify(forged)).toString('base64'),
      tag: tag as string,
    };
    await queue.add(AUDIT_JOB_NAME, data);
    await waitFor(() => results.length === 1, 'the batch written');
    expect(results[0]).toMatchObject({ inserted: 1, tagHeld: false });
    expect((await stored(EMAIL)).rows).toBe(0);
    expect((await stored(EMAIL)).plain).toBe(0);
    await close();
    await queue.close();
  });

  it("an emitter under another policy with the same key is not trusted: the writer's policy applies", async () => {
    const queue = b.queue('tag-policy');
    const { results, close } = writer('tag-policy');
    // This emitter's policy keeps e-mail task ids in clear; the writer's does not.
    const lenient = defineRedactionPolicy({ ...input, identifiers: { taskId: [/^[a-z.]+@example\.com$/] } });
    expect(auditRedactor(lenient)(event(EMAIL, 0)).taskId).toBe(EMAIL);
    const emitter = emitterOn(queue, auditRedactor(lenient));
    for (let i = 100; i < 110; i++) emitter.record(event(EMAIL, i));
    await emitter.flush();
    await waitFor(() => results.length === 1, 'the batch written');
    expect(results[0]).toMatchObject({ inserted: 10, tagHeld: false });
    expect((await stored(EMAIL)).rows).toBe(0);
    expect((await stored(EMAIL)).plain).toBe(0);
    await emitter.close();
    await close();
    await queue.close();
  });

  it('another key, a forged tag, a custom redactor or a replaced value scanner: no tag holds', async () => {
    const store = new AuditStore(pool, t.schema, writerPolicy);
    const job = await auditBatchJob([auditRedactor(emitterPolicy)(event('task-x', 0))]);
    const payload = job.data.payload;
    const good = batchTag(emitterPolicy, 1, payload) as string;
    expect(store.trustsBatch({ ...job.data, tag: good }, 1)).toBe(true);
    // The same tag for another count, or told another count of events.
    expect(store.trustsBatch({ ...job.data, tag: good }, 2)).toBe(false);
    expect(store.trustsBatch({ ...job.data, count: 2, tag: good }, 2)).toBe(false);
    // The same definition under another secret (a tag is keyed).
    const otherKey = defineRedactionPolicy({ ...input, hmacKeys: [{ id: 'k1', secret: `${SECRET}-other` }] });
    expect(store.trustsBatch({ ...job.data, tag: batchTag(otherKey, 1, payload) }, 1)).toBe(false);
    // Forged shapes.
    for (const tag of [
      undefined,
      42,
      '',
      'k1.',
      `k2.${good.slice(3)}`,
      `${good.slice(0, -1)}${good.endsWith('A') ? 'B' : 'A'}`,
      `.${good}`,
    ]) {
      expect(store.trustsBatch({ ...job.data, tag }, 1)).toBe(false);
    }
    // A policy whose value scanner was replaced has no definition to tag with.
    expect(batchTag(withValueScanner(emitterPolicy, DEFAULT_VALUE_SCANNER), 1, payload)).toBeUndefined();
    // A custom redactor's batches carry no tag.
    const queue = b.queue('tag-custom');
    const redact = auditRedactor(emitterPolicy);
    const emitter = emitterOn(queue, (e) => redact(e));
    emitter.record(event('task-custom', 0));
    await emitter.flush();
    const jobs = await queue.getJobs(['waiting']);
    expect(jobs).toHaveLength(1);
    expect(jobs[0]?.data.tag).toBeUndefined();
    await emitter.close();
    await queue.close();
  });
});
