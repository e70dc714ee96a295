/**
 * Re-running an operation on purpose, with a real worker: an enqueue of a finished key is
 * absorbed (and says so); `invalidate --rerun` retries the old job and the processor runs exactly
 * once more. Also `list`, the stats hint, `backfill --wait --timeout` and a closed stdout.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TerminalError } from '../../src/errors/processor-errors.js';
import { DEFAULT_BACKFILL_QUEUE } from '../../src/jobs/audit-backfill.js';
import { boundedKey } from '../../src/keys/idempotency-key.js';
import type { PostgresLedger } from '../../src/ledger/postgres-ledger.js';
import { rerun } from '../../src/operation/rerun.js';
import { type CommitCountingServer, postEffect, startCommitCounter } from '../../src/testing/index.js';
import { withIdempotency } from '../../src/worker/with-idempotency.js';
import { orderOperation } from '../fixtures/operations.js';
import { bull, settled } from '../helpers/bullmq.js';
import { unknownRecord } from '../helpers/cli-records.js';
import { TestContext, waitFor } from '../helpers/context.js';
import { testKeyring } from '../helpers/keyring.js';
import { childEnv, finished, runTs, spawnTs } from '../helpers/spawn.js';

const t = new TestContext('cli_rerun');
const b = bull(t);
let ledger: PostgresLedger;
let downstream: CommitCountingServer;
/** Processor runs per order. */
const runs = new Map<string, number>();

const env = (vars: Record<string, string | undefined> = {}) =>
  childEnv({ DATABASE_URL: t.databaseUrl, REDIS_URL: t.redisUrl, BQI_SCHEMA: t.schema, BQI_PREFIX: t.prefix, ...vars });
const cli = (args: string[], vars?: Record<string, string | undefined>) => runTs('src/cli/main.ts', args, env(vars));

const send = orderOperation('mail.send');
const keyOf = (order: string) =>
  boundedKey({ namespace: 'acme/mail.send', resourceKey: `order:${order}`, version: 'v1' });

beforeAll(async () => {
  await t.setup();
  ledger = t.ledger();
  // Counts every call: a re-run on purpose must reach the downstream again.
  downstream = await startCommitCounter({ honourIdempotencyKey: false });
});
afterAll(async () => {
  await downstream.close();
  await ledger.close();
  await t.teardown();
});

function startWorker(queueName: string) {
  return b.worker(
    queueName,
    withIdempotency(
      send,
      async (input, ctx) => {
        runs.set(input.order, (runs.get(input.order) ?? 0) + 1);
        if (input.order.startsWith('declined')) throw new TerminalError('CARD_DECLINED', 'declined');
        await postEffect(downstream.url, { order: input.order }, ctx.idempotencyKey);
        return { sent: true };
      },
      { ledger, keyring: testKeyring },
    ),
  );
}

describe('re-running an operation on purpose', () => {
  it('an enqueue of a finished key is absorbed; invalidate --rerun runs the processor exactly once more', async () => {
    const q = b.queue('mail');
    const w = startWorker('mail');
    const first = await send.enqueue(q, { order: 'o1' });
    expect(first).toMatchObject({ added: true, idempotencyKey: keyOf('o1') });
    expect(first.state).toBeUndefined();
    expect((await settled(q, first.jobId)).state).toBe('completed');

    const again = await send.enqueue(q, { order: 'o1' });
    expect(again).toMatchObject({ added: false, state: 'completed', jobId: first.jobId });
    const [bulkOld, bulkNew] = await send.enqueueBulk(q, [{ input: { order: 'o1' } }, { input: { order: 'o2' } }]);
    expect(bulkOld).toMatchObject({ added: false, state: 'completed' });
    expect(bulkNew).toMatchObject({ added: true });
    expect((await settled(q, bulkNew!.jobId)).state).toBe('completed');
    expect(downstream.commitsFor({ order: 'o1' })).toBe(1);

    const plain = await cli(['invalidate', keyOf('o2'), '--reason', 'no re-run']);
    expect(plain.code, plain.stderr).toBe(0);
    expect(plain.stdout).toContain(`its job ${bulkNew!.jobId} is not re-run by this`);
    expect(plain.stdout).toContain('--rerun');

    const res = await cli(['invalidate', keyOf('o1'), '--reason', 'resend after a bounce', '--rerun', '--json']);
    expect(res.code, res.stderr).toBe(0);
    expect(JSON.parse(res.stdout)).toMatchObject({
      key: keyOf('o1'),
      previousStatus: 'completed',
      rerun: { kind: 'retried', from: 'completed', queue: 'mail', jobId: first.jobId },
    });
    await waitFor(() => downstream.commitsFor({ order: 'o1' }) === 2, 'the second commit');
    expect((await settled(q, first.jobId)).state).toBe('completed');
    await waitFor(async () => (await ledger.get(keyOf('o1')))?.status === 'completed', 'the record completed');
    expect(await ledger.get(keyOf('o1'))).toMatchObject({ status: 'completed', epoch: 3 });

    // Done again: a further enqueue is absorbed, nothing runs a third time.
    expect(await send.enqueue(q, { order: 'o1' })).toMatchObject({ added: false, state: 'completed' });
    expect(runs.get('o1')).toBe(2);
    expect(downstream.commitsFor({ order: 'o1' })).toBe(2);
    // o2 was invalidated without --rerun: its job was not touched.
    expect(runs.get('o2')).toBe(1);
    await w.close();
    await q.close();
  });

  it('rerun() retries a failed job and tells a job that is gone; then the next enqueue is added', async () => {
    const q = b.queue('mail-lib');
    const w = startWorker('mail-lib');
    const failed = await send.enqueue(q, { order: 'declined-1' });
    expect((await settled(q, failed.jobId)).state).toBe('failed');
    await ledger.invalidate(keyOf('declined-1'));
    expect(await rerun(q, keyOf('declined-1'))).toEqual({ kind: 'retried', from: 'failed', jobId: failed.jobId });
    await waitFor(() => runs.get('declined-1') === 2, 'the second run');
    expect((await settled(q, failed.jobId)).state).toBe('failed');

    const done = await send.enqueue(q, { order: 'o3' });
    expect((await settled(q, done.jobId)).state).toBe('completed');
    await (await q.getJob(done.jobId))?.remove();
    await ledger.invalidate(keyOf('o3'));
    expect(await rerun(q, keyOf('o3'))).toEqual({ kind: 'gone', jobId: done.jobId });
    expect(await send.enqueue(q, { order: 'o3' })).toMatchObject({ added: true });
    // The processor counts its run before its commit reaches the downstream: wait for the commit.
    await waitFor(() => downstream.commitsFor({ order: 'o3' }) === 2, "the new job's commit");
    expect(runs.get('o3')).toBe(2);
    await w.close();
    await q.close();
  });

  it('list names the keys in a status (never error text); stats points to it; --rerun without a queue is a usage error', async () => {
    const u1 = await unknownRecord(ledger, { namespace: 'acme/x', resourceKey: 'u:1', version: 'v1' }, 'x.call');
    const u2 = await unknownRecord(ledger, { namespace: 'acme/x', resourceKey: 'u:2', version: 'v1' }, 'x.call');
    const u3 = await unknownRecord(ledger, { namespace: 'acme/y', resourceKey: 'u:3', version: 'v1' }, 'y.call');
    const [human, json, page1, byOp, failed, none, stats, badStatus, noQueue] = await Promise.all([
      cli(['list', '--status', 'unknown']),
      cli(['list', '--status', 'unknown', '--json']),
      cli(['list', '--status', 'unknown', '--limit', '1', '--json']),
      cli(['list', '--status', 'unknown', '--operation', 'y.call', '--json']),
      cli(['list', '--status', 'failed', '--json']),
      cli(['list', '--status', 'locked']),
      cli(['stats']),
      cli(['list', '--status', 'completed']),
      cli(['invalidate', u3, '--reason', 'x', '--rerun']),
    ]);
    expect(human.code, human.stderr).toBe(0);
    expect(human.stdout).toMatch(/^KEY\s+STATUS\s+EPOCH\s+OPERATION\s+JOB\s+UPDATED\s+ERROR$/m);
    expect(human.stdout).toMatch(
      new RegExp(`^${u1.replace(/[.%]/g, '\\$&')}\\s+unknown\\s+1\\s+x\\.call\\s+-\\s+\\S+\\s+TIMEOUT$`, 'm'),
    );
    expect(human.stdout).not.toContain('no answer from the provider');
    const rows = JSON.parse(json.stdout).records as { key: string; errorCode: string }[];
    expect(rows.map((r) => r.key)).toEqual([u1, u2, u3].sort());
    expect(rows[0]).toMatchObject({ status: 'unknown', epoch: 1, operation: 'x.call', errorCode: 'TIMEOUT' });
    expect(json.stdout).not.toContain('no answer from the provider');
    const p1 = JSON.parse(page1.stdout);
    expect(p1.records).toHaveLength(1);
    expect(p1.next).toBe(rows[0]?.key);
    const p2 = await cli(['list', '--status', 'unknown', '--limit', '5', '--after', p1.next, '--json']);
    expect(JSON.parse(p2.stdout).records.map((r: { key: string }) => r.key)).toEqual(rows.slice(1).map((r) => r.key));
    expect(JSON.parse(byOp.stdout).records.map((r: { key: string }) => r.key)).toEqual([u3]);
    expect(JSON.parse(failed.stdout).records.map((r: { errorCode: string }) => r.errorCode)).toContain('CARD_DECLINED');
    expect(none.stdout).toContain('no locked records');
    expect(stats.stdout).toContain('`list --status unknown`');
    expect(badStatus.code).toBe(2);
    expect(noQueue.code).toBe(2);
    expect(noQueue.stderr).toContain('give --queue <name>');
    expect((await ledger.get(u3))?.status).toBe('unknown');
  });

  it('backfill --wait --timeout gives up when nothing processes the job; a closed stdout ends quietly', async () => {
    const [gaveUp, badTimeout] = await Promise.all([
      cli(['backfill', '--wait', '--timeout', '1s', '--name', 'nobody']),
      cli(['backfill', '--wait', '--timeout', 'soon']),
    ]);
    expect(gaveUp.code).toBe(1);
    expect(gaveUp.stderr).toContain('gave up after 1.0s (--timeout)');
    expect(gaveUp.stderr).toContain('nothing has started it');
    expect(gaveUp.stderr).toContain('`bullmq-idempotency start`');
    expect(gaveUp.stderr).toContain('createBackfillWorker()');
    expect(badTimeout.code).toBe(2);

    // Like `| head`: the reader is gone before the CLI writes.
    const child = spawnTs('src/cli/main.ts', ['list', '--status', 'unknown'], env());
    child.stdout?.destroy();
    const closed = await finished(child, 30_000, 'list with a closed stdout');
    expect(closed.code, closed.stderr).toBe(0);
    expect(closed.stderr).not.toContain('EPIPE');
  });

  it('SIGINT while backfill --wait follows its job: exit 130, one line, and the job stays queued', async () => {
    const backfills = b.queue(DEFAULT_BACKFILL_QUEUE);
    const before = await backfills.getWaitingCount();
    const child = spawnTs('src/cli/main.ts', ['backfill', '--wait', '--timeout', '5m', '--name', 'interrupted'], env());
    const exit = finished(child, 60_000, 'backfill --wait');
    try {
      await waitFor(async () => (await backfills.getWaitingCount()) > before, 'the backfill job to be queued');
      child.kill('SIGINT');
      const r = await exit;

      expect(r.code).toBe(130);
      expect(r.stderr).toMatch(/stopped waiting; backfill job \S+ keeps running on the worker\n$/);
      expect(r.stderr).not.toMatch(/\n\s+at /);
      expect(await backfills.getWaitingCount()).toBe(before + 1);
    } finally {
      child.kill('SIGKILL');
      await backfills.close();
    }
  });
});
