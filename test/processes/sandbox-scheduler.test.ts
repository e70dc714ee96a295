import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { z } from 'zod';
import { boundedKey } from '../../src/keys/idempotency-key.js';
import type { PostgresLedger } from '../../src/ledger/postgres-ledger.js';
import { unseal } from '../../src/sealing/sealed-result.js';
import { type CommitCountingServer, postEffect, startCommitCounter } from '../../src/testing/index.js';
import type { WrapperEvent } from '../../src/worker/types.js';
import { withIdempotency } from '../../src/worker/with-idempotency.js';
import { testOperation } from '../fixtures/operations.js';
import { bull, settled } from '../helpers/bullmq.js';
import { TestContext, waitFor } from '../helpers/context.js';
import { testKeyring } from '../helpers/keyring.js';
import { sandboxedProcessor } from '../helpers/spawn.js';

const t = new TestContext('sandbox_scheduler');
const b = bull(t);
let ledger: PostgresLedger;
let ds: CommitCountingServer;

beforeAll(async () => {
  await t.setup();
  ledger = t.ledger();
  ds = await startCommitCounter();
});
afterAll(async () => {
  await ds.close();
  await ledger.close();
  await t.teardown();
});

describe('sandboxed processors', () => {
  it('the wrapper works inside a sandboxed processor file: one commit for duplicate jobs', async () => {
    const q = b.queue('sandboxed');
    const { file, execArgv } = sandboxedProcessor(
      fileURLToPath(new URL('../fixtures/sandboxed-processor.ts', import.meta.url)),
    );
    const w = b.worker('sandboxed', file as never, {
      concurrency: 2,
      workerForkOptions: {
        execArgv,
        env: {
          ...process.env,
          BQI_DATABASE_URL: inject('databaseUrl'),
          BQI_SCHEMA: t.schema,
          BQI_DOWNSTREAM_URL: ds.url,
        },
      },
    });
    const jobs = await q.addBulk([
      { name: 'charge', data: { order: 'sb-1', amount: 5 } },
      { name: 'charge', data: { order: 'sb-1', amount: 5 } },
      { name: 'charge', data: { order: 'sb-2', amount: 5 } },
    ]);
    const results = await Promise.all(jobs.map((j) => settled(q, j.id as string, 30_000)));
    expect(results.map((r) => r.state)).toEqual(['completed', 'completed', 'completed']);
    const [r0, r1] = results.map((r) => unseal<{ effectId: string; pid: number }>(r.returnvalue, testKeyring));
    expect(r0?.effectId).toMatch(/^eff_/);
    expect(r0?.effectId).toBe(r1?.effectId);
    expect(r0?.pid).toEqual(expect.any(Number));
    expect(r0?.pid).not.toBe(process.pid);
    expect(ds.commitsFor({ order: 'sb-1' })).toBe(1);
    expect(ds.commitsFor({ order: 'sb-2' })).toBe(1);
    const row = await ledger.get({ namespace: 'acme/payments.charge', resourceKey: 'order:sb-1', version: 'v1' });
    expect(row?.status).toBe('completed');
    await w.close();
    await q.close();
  });
});

describe('job scheduler occurrences', () => {
  it('each occurrence is its own operation; re-running one occurrence replays it', async () => {
    const q = b.queue('scheduled');
    const events: WrapperEvent[] = [];
    const report = testOperation({
      name: 'reports.send',
      input: z.object({ report: z.string() }),
      effect: (i) => i,
    });
    const w = b.worker(
      'scheduled',
      withIdempotency(
        report,
        async (input, ctx) => {
          const r = await postEffect<{ id: string }>(
            ds.url,
            { report: input.report, key: ctx.idempotencyKey },
            ctx.idempotencyKey,
          );
          return { effectId: r.body.id, key: ctx.idempotencyKey };
        },
        { ledger, keyring: testKeyring, audit: { emit: (e) => events.push(e) } },
      ),
    );
    await q.upsertJobScheduler('daily-report', { every: 150 }, { name: 'send', data: { report: 'daily' } });
    await waitFor(async () => (await q.getCompletedCount()) >= 3, 'three occurrences', 15_000);
    await q.removeJobScheduler('daily-report');
    const done = await q.getCompleted();
    const keys = done.map((j) => unseal<{ key: string }>(j.returnvalue, testKeyring).key as string);
    expect(new Set(keys).size).toBe(done.length);
    for (const j of done) {
      expect(unseal<{ key: string }>(j.returnvalue, testKeyring).key).toBe(
        boundedKey({
          namespace: 'acme/reports.send',
          resourceKey: `scheduler:daily-report@${(j.id as string).split(':').pop()}`,
          version: 'v1',
        }),
      );
    }
    const commitsBefore = ds.commitsFor({ report: 'daily' });
    expect(commitsBefore).toBeGreaterThanOrEqual(done.length);
    // An operator re-runs one finished occurrence: the recorded result comes back, no new commit.
    const first = done[0];
    if (!first) throw new Error('no occurrence');
    const finishedBefore = first.finishedOn;
    const recorded = first.returnvalue; // retry() clears the local copy
    await first.retry('completed');
    await waitFor(async () => {
      const j = await q.getJob(first.id as string);
      return j?.finishedOn !== undefined && j.finishedOn !== finishedBefore;
    }, 'the re-run');
    const rerun = await settled(q, first.id as string);
    expect(rerun.returnvalue).toEqual(recorded);
    expect(events.some((e) => e.type === 'replayed' && e.jobId === first.id)).toBe(true);
    expect(ds.commitsFor({ key: unseal<{ key: string }>(recorded, testKeyring).key })).toBe(1);
    await w.close();
    await q.close();
  });
});
