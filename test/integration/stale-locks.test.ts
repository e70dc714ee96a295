import type { Queue } from 'bullmq';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AuditEvent } from '../../src/audit/audit-event.js';
import type { AuditEmitter } from '../../src/audit/emitter.js';
import { ABANDONED_ERROR, sweepLedger } from '../../src/jobs/ledger-sweeper.js';
import type { PostgresLedger } from '../../src/ledger/postgres-ledger.js';
import type { Operation } from '../../src/operation/operation.js';
import { type CommitCountingServer, postEffect, startCommitCounter } from '../../src/testing/index.js';
import { withIdempotency } from '../../src/worker/with-idempotency.js';
import { orderInput, orderOperation } from '../fixtures/operations.js';
import { bull, settled } from '../helpers/bullmq.js';
import { TestContext, waitFor } from '../helpers/context.js';
import { testKeyring } from '../helpers/keyring.js';

/**
 * The sweeper's backstop: a `locked` row whose lease expired long ago and that no live job will
 * reach (what a job failed for good during an outage left behind) is re-driven or handed over.
 */
const t = new TestContext('stale_locks');
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

const inputSchema = orderInput;
const op = orderOperation('stale.charge', { lease: '2s' }) as unknown as Operation<
  typeof inputSchema,
  { effectId: string }
>;

async function row(order: string) {
  const r = await t.query<{ key: string; status: string; epoch: number; error: { code: string } | null }>(
    `select key, status, epoch, error from ${t.schema}.idempotency_ledger where split_part(key, ':', 2) = $1`,
    [encodeURIComponent(`order:${order}`)],
  );
  return r.rows[0];
}

/**
 * What an outage used to leave: the job failed for good (here: its one attempt ran out), the row
 * still `locked` under that attempt's epoch, its lease long expired.
 */
async function abandon(q: Queue, order: string): Promise<void> {
  await q.add('charge', { order }, { jobId: order, attempts: 1 });
  expect((await settled(q, order)).state).toBe('failed');
  const moved = await t.query(
    `update ${t.schema}.idempotency_ledger set status = 'locked', error = null, retryable = null,
       lease_expires_at = now() - interval '10 minutes', updated_at = now() - interval '10 minutes'
     where split_part(key, ':', 2) = $1`,
    [encodeURIComponent(`order:${order}`)],
  );
  expect(moved.rowCount).toBe(1);
}

describe('stale locks', () => {
  it('a failed job is retried and completes; a gone job leaves its row unknown; both audited', async () => {
    const q = b.queue('stale');
    let failFirst = true;
    const w = b.worker(
      'stale',
      withIdempotency(
        op,
        async (input, ctx) => {
          if (failFirst) throw new Error('first attempt fails');
          const res = await postEffect<{ id: string }>(ds.url, { order: input.order }, ctx.idempotencyKey);
          return { effectId: res.body.id };
        },
        { ledger, keyring: testKeyring },
      ),
    );
    try {
      await abandon(q, 'o-failed');
      await abandon(q, 'o-gone');
      await (await q.getJob('o-gone'))?.remove();
      // A fresh lock whose lease has not expired long enough is left alone.
      const live = await ledger.claim({
        key: { namespace: 'acme/stale.charge', resourceKey: 'order:o-live', version: 'v1' },
        operation: 'stale.charge',
        fingerprint: 'f',
        leaseMs: 1000,
        retentionMs: 60_000,
        downstream: 'idempotent',
        queue: 'stale',
        jobId: 'o-live',
      });
      expect(live.kind).toBe('acquired');
      failFirst = false;

      const events: AuditEvent[] = [];
      const emitter = { record: (e: AuditEvent) => events.push(e) } as unknown as AuditEmitter;
      const swept = await sweepLedger(ledger, {
        emitter,
        runId: 'r1',
        redrive: { connection: { url: t.redisUrl }, prefix: t.prefix },
      });

      expect(swept.redriven).toEqual({ retried: 1, abandoned: 1, left: 0, skipped: 0 });
      const retried = await waitFor(
        async () => ((await q.getJobState('o-failed')) === 'completed' ? settled(q, 'o-failed') : undefined),
        'the retried job to complete',
      );
      expect(retried?.state).toBe('completed');
      expect((await row('o-failed'))?.status).toBe('completed');
      expect(ds.commitsFor({ order: 'o-failed' })).toBe(1);

      const gone = await row('o-gone');
      expect(gone?.status).toBe('unknown');
      expect(gone?.error?.code).toBe(ABANDONED_ERROR.code);
      expect(ds.commitsFor({ order: 'o-gone' })).toBe(0);
      expect((await row('o-live'))?.status).toBe('locked');

      const redrives = events.filter((e) => e.action !== 'idempotency.swept');
      expect(redrives.map((e) => [e.action, e.jobId, e.decision]).sort()).toEqual([
        ['idempotency.abandoned', 'o-gone', 'pending_confirmation'],
        ['idempotency.redriven', 'o-failed', 'allow'],
      ]);
      expect(redrives.find((e) => e.jobId === 'o-gone')?.reasonCode).toBe('IDEMPOTENCY_ABANDONED');

      // A second run finds nothing more to do.
      const again = await sweepLedger(ledger, { redrive: { connection: { url: t.redisUrl }, prefix: t.prefix } });
      expect(again.redriven).toEqual({ retried: 0, abandoned: 0, left: 0, skipped: 0 });
    } finally {
      await w.close(); // graceful: it returns once the worker's loop has stopped
      await q.close();
    }
  });
});
