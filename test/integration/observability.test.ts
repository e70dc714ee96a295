/**
 * Metrics and spans from the workers: real BullMQ workers with bullmq-otel telemetry, the
 * library's observers, an in-memory span exporter and a prom-client registry read back, against
 * the shared Postgres and Redis. Counts what happened: one processor run, one claim per outcome.
 */
import { context, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { BullMQOtel } from 'bullmq-otel';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { TerminalError } from '../../src/errors/processor-errors.js';
import type { PostgresLedger } from '../../src/ledger/postgres-ledger.js';
import { createIdempotencyMetrics } from '../../src/observability/metrics.js';
import { combineObservers } from '../../src/observability/observer.js';
import { createIdempotencyTracing } from '../../src/observability/tracing.js';
import { withIdempotency } from '../../src/worker/with-idempotency.js';
import { testOperation } from '../fixtures/operations.js';
import { bull, settled } from '../helpers/bullmq.js';
import { TestContext, waitFor } from '../helpers/context.js';
import { testKeyring } from '../helpers/keyring.js';

const t = new TestContext('observability');
const b = bull(t);
let ledger: PostgresLedger;
const exporter = new InMemorySpanExporter();
const contextManager = new AsyncLocalStorageContextManager();
const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });

beforeAll(async () => {
  await t.setup();
  ledger = t.ledger();
  context.setGlobalContextManager(contextManager.enable());
  trace.setGlobalTracerProvider(provider);
});
afterAll(async () => {
  await ledger.close();
  await t.teardown();
  await provider.shutdown();
  trace.disable();
  context.disable();
});

const charge = testOperation({
  name: 'obs.charge',
  input: z.object({ order: z.string(), amount: z.number().int(), card: z.string() }),
  effect: (i) => ({ order: i.order, amount: i.amount }),
  resourceKey: (i) => `order:${i.order}`,
});

/** `name{labels}` → value of a registry's exposition. */
async function read(registry: Registry): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  for (const line of (await registry.metrics()).split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const i = line.lastIndexOf(' ');
    out.set(line.slice(0, i), Number(line.slice(i + 1)));
  }
  return out;
}

describe('worker observability', () => {
  it('counts claims by outcome and phases; spans for claim, run, complete and replay nest under the BullMQ job span', async () => {
    const registry = new Registry();
    const metrics = createIdempotencyMetrics({ registry });
    const observer = combineObservers(createIdempotencyTracing(), metrics);
    let runs = 0;
    const queue = b.queue('obs');
    const worker = b.worker(
      'obs',
      withIdempotency(
        charge,
        async (input) => {
          runs++;
          if (input.amount < 0) throw new TerminalError('CARD_DECLINED', `declined card ${input.card}`);
          return { ok: true };
        },
        { ledger, keyring: testKeyring, observer },
      ),
      { telemetry: new BullMQOtel({ tracerName: 'test-worker' }) },
    );
    try {
      const first = await charge.enqueue(queue, { order: 'o1', amount: 5, card: '4242424242424242' });
      expect((await settled(queue, first.jobId)).state).toBe('completed');
      // A second job for the same intent (another job id): replayed, the processor does not run.
      const again = await queue.add('obs.charge', (await queue.getJob(first.jobId))?.data, { jobId: 'again' });
      expect((await settled(queue, again.id as string)).state).toBe('completed');
      // Same key, other input: a conflict before anything runs.
      const conflicting = await queue.add(
        'obs.charge',
        { ...(await queue.getJob(first.jobId))?.data, input: { order: 'o1', amount: 6, card: '4242424242424242' } },
        { jobId: 'conflicting' },
      );
      expect((await settled(queue, conflicting.id as string)).state).toBe('failed');
      const declined = await charge.enqueue(queue, { order: 'o2', amount: -1, card: '4000000000000002' });
      expect((await settled(queue, declined.jobId)).state).toBe('failed');
    } finally {
      await worker.close();
      await queue.close();
    }
    expect(runs).toBe(2);

    const m = await read(registry);
    const claims = (outcome: string) =>
      m.get(`bullmq_idempotency_claims_total{operation="obs.charge",outcome="${outcome}"}`);
    expect(claims('acquired')).toBe(2);
    expect(claims('replayed')).toBe(1);
    expect(claims('conflict')).toBe(1);
    expect(m.get('bullmq_idempotency_events_total{operation="obs.charge",type="completed"}')).toBe(1);
    expect(m.get('bullmq_idempotency_events_total{operation="obs.charge",type="failed"}')).toBe(1);
    expect(
      m.get('bullmq_idempotency_phase_duration_seconds_count{operation="obs.charge",phase="run",result="ok"}'),
    ).toBe(1);
    expect(
      m.get('bullmq_idempotency_phase_duration_seconds_count{operation="obs.charge",phase="run",result="error"}'),
    ).toBe(1);

    const spans = exporter.getFinishedSpans();
    const ours = spans.filter((s) => s.name.startsWith('idempotency.'));
    expect(ours.map((s) => s.name).sort()).toEqual(
      [
        'idempotency.claim',
        'idempotency.claim',
        'idempotency.claim',
        'idempotency.claim',
        'idempotency.complete',
        'idempotency.replay',
        'idempotency.run',
        'idempotency.run',
      ].sort(),
    );
    const byId = new Map(spans.map((s) => [s.spanContext().spanId, s]));
    for (const s of ours) {
      const parent = byId.get(s.parentSpanContext?.spanId ?? '');
      // Each phase is a child of BullMQ's own job span, in the job's trace.
      expect(parent?.name, s.name).toBe('process obs');
      expect(parent?.spanContext().traceId).toBe(s.spanContext().traceId);
      expect(s.attributes['idempotency.operation']).toBe('obs.charge');
      if (s.name !== 'idempotency.complete') expect(s.attributes['messaging.destination.name'], s.name).toBe('obs');
    }
    const outcomes = ours.filter((s) => s.name === 'idempotency.claim').map((s) => s.attributes['idempotency.outcome']);
    expect(outcomes.sort()).toEqual(['acquired', 'acquired', 'conflict', 'replayed']);
    // Each claim's span names its job, as the trail tells the id (these are identifiers: in clear).
    const claimJobs = ours
      .filter((s) => s.name === 'idempotency.claim')
      .map((s) => s.attributes['messaging.message.id']);
    expect(claimJobs.filter((id) => id === 'again' || id === 'conflicting').sort()).toEqual(['again', 'conflicting']);
    expect(claimJobs.filter((id) => typeof id === 'string' && id.startsWith('idem_'))).toHaveLength(2);
    const failedRun = ours.find((s) => s.name === 'idempotency.run' && s.status.code === 2);
    expect(failedRun?.status.message).toBe('CARD_DECLINED');
    // Never the error's message, the input or the card number.
    const everything = JSON.stringify(spans.map((s) => ({ a: s.attributes, e: s.events, st: s.status })));
    expect(everything).not.toContain('4000000000000002');
    expect(everything).not.toContain('declined card');
  });

  it('counts in-progress waits and unknown outcomes: a copy that finds the key running waits, then replays; a none downstream that throws is unknown', async () => {
    const registry = new Registry();
    const observer = createIdempotencyMetrics({ registry });
    const send = testOperation({
      name: 'obs.send',
      input: z.object({ to: z.string(), fail: z.boolean() }),
      effect: (i) => i,
      resourceKey: (i) => `send:${i.to}`,
      downstream: 'none',
    });
    let release: () => void = () => {};
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    let runs = 0;
    const queue = b.queue('obs-waits');
    const worker = b.worker(
      'obs-waits',
      withIdempotency(
        send,
        async (input) => {
          runs++;
          if (input.fail) throw new Error('the downstream hung up');
          await held;
          return { sent: true };
        },
        { ledger, keyring: testKeyring, observer, inProgressPollMs: 50 },
      ),
      { concurrency: 2 },
    );
    const claims = async (outcome: string) =>
      (await read(registry)).get(`bullmq_idempotency_claims_total{operation="obs.send",outcome="${outcome}"}`) ?? 0;
    try {
      const first = await send.enqueue(queue, { to: 'a', fail: false });
      const copy = await queue.add('obs.send', (await queue.getJob(first.jobId))?.data, { jobId: 'copy' });
      await waitFor(async () => (await claims('in_progress')) >= 1, 'the copy to find the key in progress');
      release();
      expect((await settled(queue, first.jobId)).state).toBe('completed');
      expect((await settled(queue, copy.id as string)).state).toBe('completed');

      const lost = await send.enqueue(queue, { to: 'b', fail: true });
      expect((await settled(queue, lost.jobId)).state).toBe('failed');
      const again = await queue.add('obs.send', (await queue.getJob(lost.jobId))?.data, { jobId: 'again' });
      expect((await settled(queue, again.id as string)).state).toBe('failed');
    } finally {
      await worker.close();
      await queue.close();
    }
    expect(runs).toBe(2);
    expect(await claims('acquired')).toBe(2);
    expect(await claims('replayed')).toBe(1);
    expect(await claims('in_progress')).toBeGreaterThanOrEqual(1);
    expect(await claims('unknown')).toBe(1);
    // The attempt that left the outcome unknown, and the copy that met it.
    expect((await read(registry)).get('bullmq_idempotency_unknown_total{operation="obs.send"}')).toBe(2);
  });
});
