import { Writable } from 'node:stream';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { AUDIT_JOB_NAME, decodeAuditBatch } from '../../src/audit/batch-codec.js';
import { AuditEmitter } from '../../src/audit/emitter.js';
import { auditRedactor } from '../../src/audit/redact-event.js';
import type { PostgresLedger } from '../../src/ledger/postgres-ledger.js';
import { defineRedactionPolicy } from '../../src/redaction/define-policy.js';
import { pinoRedactionOptions } from '../../src/scanners/pino/pino.js';
import { withIdempotency } from '../../src/worker/with-idempotency.js';
import { CANARIES, canaryPayload, findCanaries } from '../fixtures/canaries.js';
import { testOperation } from '../fixtures/operations.js';
import { bull, settled } from '../helpers/bullmq.js';
import { TestContext, waitFor } from '../helpers/context.js';
import { testKeyring } from '../helpers/keyring.js';

const t = new TestContext('canary');
const b = bull(t);
let ledger: PostgresLedger;

beforeAll(async () => {
  await t.setup();
  ledger = t.ledger();
});
afterAll(async () => {
  await ledger.close();
  await t.teardown();
});

const policy = defineRedactionPolicy({
  version: 'canary-1',
  hmacKeys: [{ id: 'k1', secret: 'a-test-only-hmac-key-of-at-least-32-bytes' }],
  details: { 'tool.charge': ['amount', 'currency', 'reasonCode', 'meta', 'steps', 'context'] },
});

describe('redaction end to end', () => {
  it(`${CANARIES.length} canaries through wrapper → emitter → audit queue → writer: none in Postgres, Redis or logs`, async () => {
    expect(CANARIES.length).toBeGreaterThanOrEqual(50);
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk, _enc, cb) {
        lines.push(String(chunk));
        cb();
      },
    });
    const logger = pino({ level: 'debug', ...pinoRedactionOptions(policy) }, sink);
    const auditQueue = b.queue('audit');
    const emitter = new AuditEmitter({
      queue: auditQueue,
      pool: ledger.pool,
      schema: t.schema,
      redact: auditRedactor(policy),
      logger,
    });
    const writer = b.auditWriter('audit', ledger.pool, { logger });

    const op = testOperation({
      name: 'payments.charge',
      input: z.object({
        kind: z.enum(['ok', 'fail', 'terminal']),
        n: z.number(),
        payload: z.record(z.string(), z.unknown()),
      }),
      effect: (i) => ({ kind: i.kind, n: i.n }),
      resourceKey: (i) => `charge:${i.kind}:${i.n}`,
    });
    const processor = async (
      input: z.output<typeof op.definition.input>,
      ctx: Parameters<Parameters<typeof withIdempotency>[1]>[1],
    ) => {
      const p = canaryPayload();
      ctx.audit({ action: 'tool.charge', decision: 'allow', reasonCode: 'policy.ok', details: p.details });
      ctx.audit({ action: 'tool.refund', decision: 'pending_confirmation', details: p.details });
      logger.info({ input: input.payload, details: p.details }, 'processing a charge'); // what a user might log
      if (input.kind === 'fail') throw p.error;
      if (input.kind === 'terminal') throw Object.assign(p.error, { name: 'UnrecoverableError' });
      return p.result;
    };
    const q = b.queue('charges');
    const w = b.worker(
      'charges',
      withIdempotency(op, processor, { ledger, keyring: testKeyring, audit: emitter, logger }),
    );
    // Jobs that carry canaries in their input are removed when they finish (the input is the
    // application's own data); jobs whose input is clean are kept, so their failure records stay.
    const clean = { orderId: 'ord_1', amount: 10 };
    const jobs = await op.enqueueBulk(q, [
      {
        input: { kind: 'ok', n: 1, payload: canaryPayload().input },
        options: { jobOptions: { removeOnComplete: true, removeOnFail: true } },
      },
      { input: { kind: 'ok', n: 2, payload: clean } },
      { input: { kind: 'fail', n: 3, payload: clean }, options: { jobOptions: { attempts: 2, backoff: 10 } } },
      { input: { kind: 'terminal', n: 4, payload: clean } },
    ]);
    await waitFor(async () => (await ledger.get(jobs[0]!.key))?.status === 'completed', 'the first job');
    const finals = await Promise.all(jobs.slice(1).map((j) => settled(q, j.jobId)));
    expect(finals.map((f) => f.state)).toEqual(['completed', 'failed', 'failed']);
    // A replay returns the recorded (sealed) result.
    const replay = await q.add('again', { kind: 'ok', n: 2, payload: clean });
    expect((await settled(q, replay.id as string)).returnvalue).toEqual(finals[0]?.returnvalue);
    await emitter.flush();
    await waitFor(
      async () => Number((await t.query(`select count(*) from ${t.schema}.audit_events`)).rows[0]?.count) >= 20,
      'audit events',
    );
    await w.close();
    await writer.close();
    // One more batch, which stays in Redis now that the writer is gone: the scan must read it.
    emitter.record({
      eventId: 'canary-held-batch',
      actorType: 'agent',
      actorId: 'assistant',
      action: 'tool.charge',
      resourceType: 'payment',
      resourceId: 'pay_1',
      decision: 'allow',
      createdAt: new Date().toISOString(),
      phase: 'intent',
      details: canaryPayload().details,
    });
    await emitter.flush();
    expect(await auditQueue.getJobCounts('wait')).toEqual({ wait: 1 });

    // Postgres: every table of the schema, every column, as text.
    const tables = await t.query(`select table_name from information_schema.tables where table_schema = $1`, [
      t.schema,
    ]);
    let pgText = '';
    for (const { table_name } of tables.rows) {
      const rows = await t.query(`select t::text as row from ${t.schema}.${table_name} t`);
      pgText += rows.rows.map((r) => r.row).join('\n');
    }
    expect(pgText).toContain('tool.charge'); // the scan reads real data
    expect(pgText).toMatch(/policyVersion\W+canary-1/); // receipts are stored
    // Redis: every key under this file's prefix, whatever its type.
    const redis = t.redis();
    const keys = await redis.keys(`${t.prefix}*`);
    let redisText = '';
    for (const key of keys) {
      const type = await redis.type(key);
      if (type === 'string') redisText += await redis.get(key);
      else if (type === 'hash') {
        const hash = await redis.hgetall(key);
        redisText += JSON.stringify(hash);
        // Audit batches are stored deflated: read what they hold, as anyone with Redis access could.
        if (hash.name === AUDIT_JOB_NAME)
          redisText += JSON.stringify(await decodeAuditBatch(JSON.parse(hash.data ?? '')));
      } else if (type === 'list') redisText += JSON.stringify(await redis.lrange(key, 0, -1));
      else if (type === 'zset') redisText += JSON.stringify(await redis.zrange(key, 0, -1));
      else if (type === 'set') redisText += JSON.stringify(await redis.smembers(key));
      else if (type === 'stream') redisText += JSON.stringify(await redis.xrange(key, '-', '+'));
    }
    expect(redisText).toContain('failedReason'); // failure records are there, scrubbed
    expect(redisText).toContain('canary-held-batch'); // and the held audit batch, decoded
    const logText = lines.join('');
    expect(logText).toContain('processing a charge');

    expect(findCanaries(pgText)).toEqual([]);
    expect(findCanaries(redisText)).toEqual([]);
    expect(findCanaries(logText)).toEqual([]);
    // The detector itself finds the canaries in the raw payload (the scan is not blind).
    expect(
      findCanaries(JSON.stringify({ ...canaryPayload(), error: String(canaryPayload().error.cause) })).length,
    ).toBeGreaterThan(40);

    await redis.quit();
    await auditQueue.close();
    await q.close();
    await emitter.close();
  });
});
