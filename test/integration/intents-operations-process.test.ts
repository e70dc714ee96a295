/**
 * The operations process relays: an intent committed in a transaction is added at its commit
 * (the process listens), and when Redis loses its data (every key under this file's prefix
 * deleted: the jobs, the relay's own schedule) the relay's schedule is re-created, `/readyz`
 * names it while it is missing, and every intent not yet claimed is added again, counted in
 * `/metrics`.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { collectStats, renderStats } from '../../src/cli/commands/stats.js';
import { CliContext } from '../../src/cli/context.js';
import { loadCliConfig, loadConfig } from '../../src/config/env.js';
import { startOperationsProcess } from '../../src/ops/operations-process.js';
import type { Idempotency } from '../../src/runtime/create-idempotency.js';
import { chargeOperation } from '../fixtures/operations.js';
import { TestContext, waitFor } from '../helpers/context.js';
import { wipePrefix } from '../helpers/intents.js';
import { testRuntime } from '../helpers/runtime.js';

const t = new TestContext('intents_ops');
const charge = chargeOperation({ queue: 'ops-charges' });
const N = 10;
const RELAY_EVERY_MS = 1_000;
let idem: Idempotency;

beforeAll(async () => {
  await t.setup();
  idem = testRuntime(t);
});
afterAll(async () => {
  await idem.close();
  await t.teardown();
});

async function stats() {
  const ctx = new CliContext(
    loadCliConfig({ DATABASE_URL: t.databaseUrl, REDIS_URL: t.redisUrl, BQI_SCHEMA: t.schema, BQI_PREFIX: t.prefix }),
  );
  try {
    return await collectStats(ctx);
  } finally {
    await ctx.close();
  }
}

describe('the operations process relays intents', () => {
  it('adds them at commit, and again after Redis lost them, its schedule re-created', async () => {
    const proc = await startOperationsProcess(
      loadConfig({
        DATABASE_URL: t.databaseUrl,
        REDIS_URL: t.redisUrl,
        BQI_SCHEMA: t.schema,
        BQI_PREFIX: t.prefix,
        BQI_HTTP_PORT: '0',
        BQI_HTTP_HOST: '127.0.0.1',
        LOG_LEVEL: 'silent',
      }),
      // The poll is slow: a job added at once after the commit is the listener's doing. Each
      // /readyz below checks anew (no answer shared across the probes of a second).
      { relay: { everyMs: RELAY_EVERY_MS, recheckAfterMs: 200 }, readyCacheMs: 0 },
    );
    const base = `http://127.0.0.1:${proc.http?.address?.port}`;
    const queue = idem.queue(charge);
    try {
      expect((await stats()).schedules).toEqual({ sweeper: true, relay: true });
      const client = await idem.pool.connect();
      try {
        await client.query('begin');
        for (let i = 0; i < N; i++) await idem.enqueue(charge, { order: `p-${i}`, amount: 3 }, { tx: client });
        await client.query('commit');
      } finally {
        client.release();
      }
      await waitFor(() => proc.relay.totals.relayed === N, `${N} intents relayed`, 10_000);
      expect((await queue.getJobCounts('waiting')).waiting).toBe(N);

      const schedule = proc.schedules.relay;
      await wipePrefix(t);
      const recreatedBefore = schedule.recreated;
      const lost = await stats();
      // The process checks its schedule every interval: on a slow machine it may have put it back
      // before `stats` looked. Seen missing whenever it was not re-created meanwhile.
      if (schedule.recreated === recreatedBefore) {
        expect(lost.schedules).toMatchObject({ relay: false });
        expect(renderStats(lost)).toMatch(/^ {2}intent relay\s+MISSING from Redis/m);
      }
      const ready = await fetch(`${base}/readyz`);
      if (schedule.recreated === 0) {
        expect(ready.status).toBe(503);
        expect(((await ready.json()) as { schedules: { missing: string[] } }).schedules.missing).toContain('relay');
      }
      // Re-created within an interval or two; its next run adds every vanished job again.
      await waitFor(
        () => schedule.recreated > 0 && proc.relay.totals.readded === N,
        'the relay schedule re-created and the jobs added again',
        6 * RELAY_EVERY_MS,
      );
      expect((await queue.getJobCounts('waiting')).waiting).toBe(N);
      // The relay's schedule is back (the sweeper's, lost too, waits for its own longer interval).
      const after = (await (await fetch(`${base}/readyz`)).json()) as { schedules: 'ok' | { missing: string[] } };
      expect(after.schedules === 'ok' ? [] : after.schedules.missing).not.toContain('relay');
      // Each re-add is in the trail, written by the process's own audit writer.
      await waitFor(
        async () =>
          (
            await t.query(
              `select count(*)::int as n from ${t.schema}.audit_events where action = 'idempotency.intent_readded'`,
            )
          ).rows[0]?.n === N,
        `${N} re-adds in the audit trail`,
      );
      const metrics = await (await fetch(`${base}/metrics`)).text();
      expect(metrics).toMatch(/bullmq_idempotency_intents_total\{result="readded"\} 10/);
      expect(metrics).toMatch(/bullmq_idempotency_intents_total\{result="relayed"\} 10/);
    } finally {
      expect(await proc.close()).toEqual({ clean: true });
    }
  });
});
