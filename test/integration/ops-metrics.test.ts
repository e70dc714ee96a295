/**
 * The operations process's `/metrics`, read over real HTTP: ledger figures, the audit lag as the
 * age of the oldest event not yet written (a delayed batch, an outbox row), queue and outbox
 * sizes, dead letters and the writer's counters.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AUDIT_JOB_NAME } from '../../src/audit/emitter.js';
import { loadConfig } from '../../src/config/env.js';
import { answerConfirmation } from '../../src/confirm/answer.js';
import { ConfirmationStore } from '../../src/confirm/confirmation-store.js';
import type { PostgresLedger } from '../../src/ledger/postgres-ledger.js';
import { OperationsMetrics } from '../../src/observability/operations-metrics.js';
import { startOperationsProcess } from '../../src/ops/operations-process.js';
import { sampleAuditEvent } from '../helpers/audit-sample.js';
import { bull } from '../helpers/bullmq.js';
import { unknownRecord } from '../helpers/cli-records.js';
import { TestContext, waitFor } from '../helpers/context.js';

const t = new TestContext('ops_metrics');
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

/** `name{labels} value` lines of a Prometheus text exposition, as a map. */
function parseMetrics(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const i = line.lastIndexOf(' ');
    out.set(line.slice(0, i), Number(line.slice(i + 1)));
  }
  return out;
}

const event = (id: string) => sampleAuditEvent('ops-metrics-test', id);

describe('operations metrics', () => {
  it('/metrics serves ledger, audit and process figures; the writer counts what it writes', async () => {
    await unknownRecord(ledger, { namespace: 'acme/m', resourceKey: 'unknown:1', version: 'v1' }, 'm.op');
    const locked = await ledger.claim({
      key: { namespace: 'acme/m', resourceKey: 'locked:1', version: 'v1' },
      operation: 'm.op',
      fingerprint: 'fp',
      leaseMs: 60_000,
      retentionMs: 3_600_000,
      downstream: 'idempotent',
    });
    expect(locked.kind).toBe('acquired');
    await t.query(`insert into ${t.schema}.audit_dead_letter (event, reason) values ('{}', 'AUDIT_EVENT_INVALID')`);

    const config = loadConfig({
      DATABASE_URL: t.databaseUrl,
      REDIS_URL: t.redisUrl,
      BQI_SCHEMA: t.schema,
      BQI_PREFIX: t.prefix,
      BQI_AUDIT_QUEUE: 'audit-metrics',
      BQI_HTTP_PORT: '0',
      BQI_HTTP_HOST: '127.0.0.1',
      LOG_LEVEL: 'silent',
    });
    const proc = await startOperationsProcess(config);
    try {
      const port = proc.http?.address?.port as number;
      const auditQueue = b.queue('audit-metrics');
      const written = event('written');
      await auditQueue.add(AUDIT_JOB_NAME, { events: [written, event('written-2')] });
      await waitFor(
        async () =>
          Number(
            (await t.query(`select count(*) from ${t.schema}.audit_events where event_id = $1`, [written.eventId]))
              .rows[0]?.count,
          ) === 1,
        'the batch in Postgres',
      );
      await auditQueue.close();

      const res = await fetch(`http://127.0.0.1:${port}/metrics`);
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toContain('text/plain');
      const m = parseMetrics(await res.text());
      expect(m.get('bullmq_idempotency_ledger_records{status="unknown"}')).toBe(1);
      expect(m.get('bullmq_idempotency_ledger_records{status="locked"}')).toBe(1);
      expect(m.get('bullmq_idempotency_ledger_records{status="completed"}')).toBe(0);
      expect(m.get('bullmq_idempotency_unknown_records')).toBe(1);
      expect(m.get('bullmq_idempotency_oldest_lease_seconds')).toBeGreaterThan(0);
      expect(m.get('bullmq_idempotency_expired_leases')).toBe(0);
      expect(m.get('bullmq_idempotency_audit_dead_letters')).toBe(1);
      expect(m.get('bullmq_idempotency_audit_outbox_batches')).toBe(0);
      expect(m.get('bullmq_idempotency_figures_up')).toBe(1);
      // This batch and the sweeper's summary: two inserted at least, both batches written.
      expect(m.get('bullmq_idempotency_audit_events_total{result="inserted"}')).toBeGreaterThanOrEqual(2);
      expect(m.get('bullmq_idempotency_audit_batches_total{result="written"}')).toBeGreaterThanOrEqual(1);
      expect(m.has('process_cpu_seconds_total')).toBe(true);
    } finally {
      expect(await proc.close()).toEqual({ clean: true });
    }
  });

  it('the audit lag is the age of the oldest event not yet written, not the time since the newest', async () => {
    const pool = t.pool(2);
    const auditQueue = b.queue('audit-lag'); // no writer consumes it
    const metrics = new OperationsMetrics({ pool, schema: t.schema, auditQueue, maxAgeMs: 0 });
    const lag = async () => parseMetrics((await metrics.render()).body).get('bullmq_idempotency_audit_lag_seconds');
    try {
      await t.query(`delete from ${t.schema}.audit_outbox`);
      expect(await lag()).toBe(0);

      // A batch parked in the outbox 5 minutes ago (Redis refused it then): 300 s behind, even
      // though events were written a moment ago by the other test.
      await t.query(
        `insert into ${t.schema}.audit_outbox (events, reason, created_at) values ($1, 'ECONNREFUSED', now() - interval '5 minutes')`,
        [JSON.stringify([event('parked')])],
      );
      const parked = (await lag()) as number;
      expect(parked).toBeGreaterThanOrEqual(300);
      expect(parked).toBeLessThan(400);
      const m = parseMetrics((await metrics.render()).body);
      expect(m.get('bullmq_idempotency_audit_outbox_batches')).toBe(1);
      expect(m.get('bullmq_idempotency_audit_outbox_events')).toBe(1);

      // A batch stuck in the queue (delayed, as a writer does during an outage), older than the outbox row.
      await t.query(`delete from ${t.schema}.audit_outbox`);
      const stuck = await auditQueue.add(AUDIT_JOB_NAME, { events: [event('stuck')] }, { delay: 3_600_000 });
      const client = await auditQueue.backend.client;
      await client.hset(auditQueue.toKey(stuck.id as string), { timestamp: Date.now() - 120_000 });
      const queued = parseMetrics((await metrics.render()).body);
      expect(queued.get('bullmq_idempotency_audit_queue_batches{state="delayed"}')).toBe(1);
      expect(queued.get('bullmq_idempotency_audit_lag_seconds')).toBeGreaterThanOrEqual(120);
      expect(queued.get('bullmq_idempotency_audit_lag_seconds')).toBeLessThan(200);

      await stuck.remove();
      expect(await lag()).toBe(0);
    } finally {
      await auditQueue.close();
      await pool.end();
    }
  });

  it('counts the pending confirmation requests and the age of the oldest', async () => {
    const pool = t.pool(2);
    const auditQueue = b.queue('audit-confirm');
    const metrics = new OperationsMetrics({ pool, schema: t.schema, auditQueue, maxAgeMs: 0 });
    const store = new ConfirmationStore(pool, t.schema);
    const figures = async () => {
      const m = parseMetrics((await metrics.render()).body);
      return [
        m.get('bullmq_idempotency_pending_confirmations'),
        m.get('bullmq_idempotency_oldest_pending_confirmation_seconds'),
      ];
    };
    const ask = (order: string) =>
      store.request({
        operationKey: `acme%2Fm:order%3A${order}:v1`,
        name: 'large-payment',
        operation: 'm.op',
        reason: `charge order ${order}`,
        onTimeout: 'deny',
        timeoutMs: 3_600_000,
        epoch: 1,
      });
    try {
      expect(await figures()).toEqual([0, 0]);
      const old = await ask('m-1');
      await ask('m-2');
      // The first was asked 10 minutes ago.
      await t.query(
        `update ${t.schema}.idempotency_confirmations set requested_at = now() - interval '10 minutes' where n = $1`,
        [old.id.slice(3)],
      );
      const [count, oldest] = (await figures()) as [number, number];
      expect(count).toBe(2);
      expect(oldest).toBeGreaterThanOrEqual(600);
      expect(oldest).toBeLessThan(700);
      await answerConfirmation({ pool, schema: t.schema, id: old.id, approve: true, actor: 'alice' });
      const [after, newest] = (await figures()) as [number, number];
      expect(after).toBe(1);
      expect(newest).toBeLessThan(600);
    } finally {
      await auditQueue.close();
      await pool.end();
    }
  });
});
