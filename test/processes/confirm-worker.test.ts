/**
 * `ctx.confirm()` with real worker processes: a job that asks for a person's yes waits as a delayed
 * job (no attempt used, no lease held) and survives a SIGKILL of its worker; the answer (CLI,
 * library) wakes it on another worker; the side effect commits once, after the approval, and the
 * step before the confirmation is not repeated. Commits are counted at a real HTTP downstream.
 */
import type { Job, Queue, Worker } from 'bullmq';
import type pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest';
import { AuditStore } from '../../src/audit/audit-store.js';
import { eventsForRecord } from '../../src/audit/derive.js';
import { renderTimeline, timeline } from '../../src/audit/timeline.js';
import { answerConfirmation } from '../../src/confirm/answer.js';
import { ConfirmationStore } from '../../src/confirm/confirmation-store.js';
import { MIN_RECHECK_MS, PARKED_FIELD } from '../../src/confirm/parked-job.js';
import type { Confirmation } from '../../src/confirm/types.js';
import type { PostgresLedger } from '../../src/ledger/postgres-ledger.js';
import { unseal } from '../../src/sealing/sealed-result.js';
import { type CommitCountingServer, startCommitCounter } from '../../src/testing/commit-counter.js';
import { bull, settled } from '../helpers/bullmq.js';
import {
  AUDIT_QUEUE,
  type ConfirmInput,
  type ConfirmWorker,
  confirmOperation,
  spawnConfirmWorker,
} from '../helpers/confirm-worker.js';
import { TestContext, waitFor } from '../helpers/context.js';
import { testKeyring } from '../helpers/keyring.js';
import { childEnv, runTs } from '../helpers/spawn.js';

const t = new TestContext('confirm_worker');
const b = bull(t);
const QUEUE = 'payments';
/** Children connect under their own application_name: the file's leak check sees this process only. */
const childDatabaseUrl = (() => {
  const u = new URL(inject('databaseUrl'));
  u.searchParams.set('application_name', `${t.tag}_child`);
  return u.toString();
})();

let pool: pg.Pool;
let ledger: PostgresLedger;
let store: ConfirmationStore;
let ds: CommitCountingServer;
let queue: Queue;
let writer: Worker;
const children: ConfirmWorker[] = [];

const cli = (args: string[]) =>
  runTs(
    'src/cli/main.ts',
    args,
    childEnv({ DATABASE_URL: t.databaseUrl, REDIS_URL: t.redisUrl, BQI_SCHEMA: t.schema, BQI_PREFIX: t.prefix }),
    120_000,
  );

async function worker(concurrency = 1): Promise<ConfirmWorker> {
  const w = await spawnConfirmWorker({
    databaseUrl: childDatabaseUrl,
    redisUrl: t.redisUrl,
    schema: t.schema,
    prefix: t.prefix,
    queue: QUEUE,
    downstreamUrl: ds.url,
    concurrency,
  });
  children.push(w);
  return w;
}

const charges = (order: string) => ds.commitsFor({ order, step: 'charge' });
const quotes = (order: string) => ds.commitsFor({ order, step: 'quote' });
const keyOf = (order: string) => `acme%2Fpayments.large_charge:order%3A${order}:v1`;

/** The request of an order's operation once it exists, and once its asking job is parked. */
async function pendingRequest(order: string): Promise<Confirmation> {
  return waitFor<Confirmation | undefined>(
    async () => {
      const [c] = await store.of({ operationKey: keyOf(order) });
      return c?.status === 'pending' && c.waiters.length > 0 ? c : undefined;
    },
    `the confirmation of ${order}`,
    60_000,
    100,
  ) as Promise<Confirmation>;
}

/**
 * Waits until the job sits in the delayed set and its attempt has ended: the lease given back
 * (the attempt's last step, after its own look at the request once it was parked).
 */
async function parked(jobId: string, order: string): Promise<Job> {
  return waitFor(
    async () => {
      const job = await queue.getJob(jobId);
      if (!job || (await job.getState()) !== 'delayed') return undefined;
      return (await ledger.get(keyOf(order)))?.status === 'released' ? job : undefined;
    },
    `job ${jobId} to be parked`,
    60_000,
    50,
  ) as Promise<Job>;
}

async function auditRows(where: string, values: unknown[]) {
  return (
    await t.query(
      `select action, actor_type, actor_id, decision, reason_code from ${t.schema}.audit_events where ${where} order by created_at`,
      values,
    )
  ).rows;
}

/** The operation's own events of a task (its steps' left out), in the trail's order. */
async function operationTrail(taskId: string) {
  return (
    await t.query(
      `select action, epoch, actor_type, decision, reason_code from ${t.schema}.audit_events
       where task_id = $1 and step_id is null order by created_at, seq, epoch`,
      [taskId],
    )
  ).rows;
}

beforeAll(async () => {
  await t.setup();
  pool = t.pool();
  ledger = t.ledger();
  store = new ConfirmationStore(pool, t.schema);
  ds = await startCommitCounter();
  queue = b.queue(QUEUE);
  writer = b.auditWriter(AUDIT_QUEUE, pool);
});
afterEach(async () => {
  for (const c of children.splice(0)) await c.stop();
});
afterAll(async () => {
  await ds.close();
  await writer.close();
  await queue.close();
  await ledger.close();
  await pool.end();
  await t.teardown();
});

describe('ctx.confirm() across worker processes', () => {
  it('the worker is SIGKILLed while the job waits; another runs it after a CLI approval: one charge, the step not repeated', async () => {
    const order = 'o-crash';
    const first = await worker();
    const { jobId } = await confirmOperation.enqueue(queue, { order, amount: 500_000 }, { taskId: 'task-crash' });
    const c = await pendingRequest(order);
    const job = await parked(jobId, order);
    expect(job.attemptsMade).toBe(0); // parked without using an attempt
    expect((await ledger.get(keyOf(order)))?.status).toBe('released'); // no lease held while it waits
    expect(quotes(order)).toBe(1);
    expect(charges(order)).toBe(0);
    // The request's details are kept only sealed: neither the amount nor the quote in clear.
    const quoteId = ds.effectsFor({ order, step: 'quote' })[0]?.id as string;
    const raw = await t.query(`select details::text as d from ${t.schema}.idempotency_confirmations where n = $1`, [
      c.id.slice(3),
    ]);
    expect(raw.rows[0]?.d).not.toContain(quoteId);
    expect(raw.rows[0]?.d).not.toContain('500000');
    expect(
      testKeyring.open(c.details as string, {
        purpose: 'value',
        operation: c.operation,
        field: `confirm:${c.name}`,
        key: c.operationKey,
      }),
    ).toEqual({ amount: 500_000, quote: quoteId });
    // The writer has stored the waiting attempt's events: the lease given back is in the trail.
    await waitFor(
      async () => (await operationTrail('task-crash')).some((r) => r.action === 'idempotency.released'),
      'the release of the waiting attempt in audit_events',
      30_000,
      100,
    );
    await first.kill();
    expect(first.child.signalCode).toBe('SIGKILL');

    await worker();
    expect(charges(order)).toBe(0); // nobody charges without an answer
    const approved = await cli(['confirm', c.id, '--approve', '--reason', 'invoice 881 checked', '--actor', 'alice']);
    expect(approved.stderr).toBe('');
    expect(approved.code).toBe(0);
    expect(approved.stdout).toMatch(/approved .*1 waiting job woken/);

    const r = await settled(queue, jobId, 60_000);
    expect(r.state).toBe('completed');
    expect(charges(order)).toBe(1);
    expect(quotes(order)).toBe(1); // the step before the confirmation ran once
    expect(ds.effectsFor({ order }).map((e) => (e.body as { step: string }).step)).toEqual(['quote', 'charge']);
    expect(r.returnvalue).toMatchObject({ $sealed: expect.any(String) });
    // ctx.confirm() returned the answer: who approved it reached the processor.
    expect(unseal(r.returnvalue, testKeyring)).toMatchObject({ approvedBy: 'alice' });
    expect(await ledger.get(keyOf(order))).toMatchObject({ status: 'completed' });

    // The trail: the request (by the operation), the answer (by alice), each once.
    await waitFor(
      async () => (await auditRows('resource_id = $1', [c.id])).length === 2,
      'the two events',
      30_000,
      100,
    );
    expect(await auditRows('resource_id = $1', [c.id])).toEqual([
      {
        action: 'confirmation.request',
        actor_type: 'agent',
        actor_id: 'payments.large_charge',
        decision: 'pending_confirmation',
        reason_code: 'CONFIRMATION_REQUIRED',
      },
      {
        action: 'confirmation.answer',
        actor_type: 'user',
        actor_id: 'alice',
        decision: 'allow',
        reason_code: 'CONFIRMATION_APPROVED',
      },
    ]);
    // The operation's trail, as audit_events stores it, in order: the attempt that asked, the
    // lease given back while it waits, the person's answer, the attempt that completed.
    await waitFor(
      async () => (await operationTrail('task-crash')).some((r) => r.action === 'idempotency.completed'),
      'the completion in audit_events',
      30_000,
      100,
    );
    expect(await operationTrail('task-crash')).toEqual([
      { action: 'idempotency.claimed', epoch: 1, actor_type: 'system', decision: 'allow', reason_code: null },
      {
        action: 'confirmation.request',
        epoch: 1,
        actor_type: 'agent',
        decision: 'pending_confirmation',
        reason_code: 'CONFIRMATION_REQUIRED',
      },
      {
        action: 'idempotency.released',
        epoch: 1,
        actor_type: 'system',
        decision: 'allow',
        reason_code: 'CONFIRMATION_PENDING',
      },
      {
        action: 'confirmation.answer',
        epoch: 1,
        actor_type: 'user',
        decision: 'allow',
        reason_code: 'CONFIRMATION_APPROVED',
      },
      { action: 'idempotency.claimed', epoch: 2, actor_type: 'system', decision: 'allow', reason_code: null },
      { action: 'idempotency.completed', epoch: 2, actor_type: 'system', decision: 'allow', reason_code: null },
    ]);

    // What the backfill would derive from the ledger's record, had a live event been lost: the
    // release carries the same reason code.
    const record = await ledger.get(keyOf(order));
    expect(
      eventsForRecord(record as NonNullable<typeof record>)
        .filter((e) => e.action === 'idempotency.released')
        .map((e) => [e.epoch, e.reasonCode]),
    ).toEqual([[1, 'CONFIRMATION_PENDING']]);

    // The timeline: one entry for the wait, from the request to the answer, and who answered.
    const answered = await store.get(c.id);
    const story = await timeline({ taskId: 'task-crash' }, { store: new AuditStore(pool, t.schema), ledger });
    expect(story.confirmations).toEqual([
      {
        id: c.id,
        operationId: keyOf(order),
        requestedBy: 'agent:payments.large_charge',
        since: c.requestedAt.toISOString(),
        until: answered.answeredAt?.toISOString(),
        waitedMs: (answered.answeredAt?.getTime() ?? 0) - c.requestedAt.getTime(),
        status: 'approved',
        answeredBy: 'user:alice',
        reasonCode: 'CONFIRMATION_APPROVED',
      },
    ]);
    expect(story.confirmations[0]?.waitedMs).toBeGreaterThan(0);
    expect(story.waits).toEqual([]);
    expect(renderTimeline(story)).toMatch(new RegExp(`confirmation ${c.id} approved by user:alice after \\d`));
  });

  it('deny: the operation ends as a recorded failure with the denial code, and every later delivery replays it', async () => {
    const order = 'o-deny';
    await worker();
    const { jobId } = await confirmOperation.enqueue(queue, { order, amount: 900_000 });
    const c = await pendingRequest(order);
    await parked(jobId, order);
    const answer = await answerConfirmation({
      pool,
      schema: t.schema,
      id: c.id,
      approve: false,
      actor: 'bob',
      comment: 'over the monthly limit',
      queue: () => queue,
    });
    expect(answer.woken).toBe(1);
    const r = await settled(queue, jobId, 60_000);
    expect(r.state).toBe('failed');
    expect(r.failedReason).toMatch(/IDEMPOTENCY_CONFIRMATION_DENIED/);
    expect(await ledger.get(keyOf(order))).toMatchObject({
      status: 'failed',
      error: { code: 'IDEMPOTENCY_CONFIRMATION_DENIED' },
    });
    // A later delivery of the same intent (another job, the key from the input) replays the failure.
    const again = await queue.add('again', { order, amount: 900_000 } satisfies ConfirmInput);
    const replay = await settled(queue, again.id as string, 60_000);
    expect(replay.state).toBe('failed');
    expect(replay.failedReason).toMatch(/IDEMPOTENCY_RECORDED_FAILURE/);
    expect(replay.failedReason).toMatch(/IDEMPOTENCY_CONFIRMATION_DENIED/);
    expect(charges(order)).toBe(0);
    expect(quotes(order)).toBe(1);
    expect(await store.of({ operationKey: keyOf(order) })).toHaveLength(1);
  });

  it('50 deliveries of one intent while it waits: one request, one answer, one charge', async () => {
    const order = 'o-many';
    await worker(10);
    const input: ConfirmInput = { order, amount: 700_000 };
    const jobs = await queue.addBulk(Array.from({ length: 50 }, (_, i) => ({ name: `dup-${i}`, data: input })));
    const c = await pendingRequest(order);
    const [a, b2] = await Promise.all([
      answerConfirmation({ pool, schema: t.schema, id: c.id, approve: true, actor: 'carol', queue: () => queue }),
      answerConfirmation({ pool, schema: t.schema, id: c.id, approve: true, actor: 'dave', queue: () => queue }),
    ]);
    expect([a.recorded, b2.recorded].sort()).toEqual([false, true]);
    const results = await Promise.all(jobs.map((j) => settled(queue, j.id as string, 120_000)));
    expect(results.map((r) => r.state)).toEqual(Array(50).fill('completed'));
    expect(charges(order)).toBe(1);
    expect(quotes(order)).toBe(1);
    const rows = await t.query(
      `select count(*)::int as n from ${t.schema}.idempotency_confirmations where operation_key = $1`,
      [keyOf(order)],
    );
    expect(rows.rows[0]?.n).toBe(1);
    await waitFor(
      async () => (await auditRows('resource_id = $1', [c.id])).length === 2,
      'one request and one answer event',
      30_000,
      100,
    );
  });

  it('an answer that wakes nobody (no queue given) is found at the next re-check', async () => {
    const order = 'o-recheck';
    await worker();
    const { jobId } = await confirmOperation.enqueue(queue, { order, amount: 600_000, recheckMs: 1000 });
    const c = await pendingRequest(order);
    await parked(jobId, order);
    const answer = await answerConfirmation({ pool, schema: t.schema, id: c.id, approve: true, actor: 'erin' });
    expect(answer.woken).toBe(0);
    const r = await settled(queue, jobId, 60_000);
    expect(r.state).toBe('completed');
    expect(r.job.attemptsMade).toBe(1); // the waits used none
    expect(charges(order)).toBe(1);
    expect(quotes(order)).toBe(1);
    expect(await store.of({ operationKey: keyOf(order) })).toHaveLength(1);
    // However many times the job looked again, the timeline has one wait, one request event, one answer.
    const story = await timeline({ operationKey: keyOf(order) }, { store: new AuditStore(pool, t.schema), ledger });
    expect(story.confirmations).toMatchObject([{ id: c.id, status: 'approved', answeredBy: 'user:erin' }]);
    expect(story.events.filter((e) => e.resourceId === c.id).map((e) => e.action)).toEqual([
      'confirmation.request',
      'confirmation.answer',
    ]);
  });

  it('a parked job that looks again and finds no answer parks again unclaimed: one claim and one release for the whole wait', async () => {
    const order = 'o-looks';
    const w = await worker();
    const { jobId } = await confirmOperation.enqueue(
      queue,
      { order, amount: 400_000, recheckMs: 200 },
      { taskId: 'task-looks' },
    );
    const c = await pendingRequest(order);
    await parked(jobId, order);
    const starts = () => w.lines().filter((l) => l.event === 'job-active' && l.jobId === jobId).length;
    // The first attempt asked; five more starts are five looks at the request with no answer.
    await waitFor(() => starts() >= 6, 'five re-checks of the parked job', 60_000, 50);
    const waiting = await ledger.get(keyOf(order));
    expect(waiting).toMatchObject({ status: 'released', epoch: 1 });
    expect(waiting?.transitions?.map((x) => `${x.transition}:${x.epoch}`)).toEqual(['claimed:1', 'released:1']);
    expect(quotes(order)).toBe(1);
    expect(charges(order)).toBe(0);
    expect((await queue.getJob(jobId))?.attemptsMade).toBe(0);

    const answer = await answerConfirmation({
      pool,
      schema: t.schema,
      id: c.id,
      approve: true,
      actor: 'frank',
      queue: () => queue,
    });
    expect(answer.recorded).toBe(true);
    const r = await settled(queue, jobId, 60_000);
    expect(r.state).toBe('completed');
    expect(charges(order)).toBe(1);
    expect(quotes(order)).toBe(1);
    const done = await ledger.get(keyOf(order));
    expect(done?.transitions?.map((x) => `${x.transition}:${x.epoch}`)).toEqual([
      'claimed:1',
      'released:1',
      'reclaimed:2',
      'completed:2',
    ]);
    await waitFor(
      async () => (await operationTrail('task-looks')).some((e) => e.action === 'idempotency.completed'),
      'the completion in audit_events',
      30_000,
      100,
    );
    expect((await operationTrail('task-looks')).map((e) => `${e.action}:${e.epoch}`)).toEqual([
      'idempotency.claimed:1',
      'confirmation.request:1',
      'idempotency.released:1',
      'confirmation.answer:1',
      'idempotency.claimed:2',
      'idempotency.completed:2',
    ]);
  });

  it('a job whose mark names a request that is gone claims as without one, asks, and parks under its own request', async () => {
    const order = 'o-stale-mark';
    const { jobId } = await confirmOperation.enqueue(queue, { order, amount: 300_000, recheckMs: 200 });
    const enqueued = (await queue.getJob(jobId)) as Job;
    // The mark of a wait whose request was swept since: the job reads it, finds nothing, goes on.
    await enqueued.updateData({ ...enqueued.data, [PARKED_FIELD]: { id: 'cf-999999999', recheckMs: 200 } });
    await worker();
    const c = await pendingRequest(order);
    const job = await parked(jobId, order);
    expect(quotes(order)).toBe(1);
    // recheckEvery 200 ms is clamped to the least interval a mark is read with (MIN_RECHECK_MS).
    expect(job.data[PARKED_FIELD]).toEqual({ id: c.id, recheckMs: MIN_RECHECK_MS });
    await answerConfirmation({ pool, schema: t.schema, id: c.id, approve: true, actor: 'gina', queue: () => queue });
    const r = await settled(queue, jobId, 60_000);
    expect(r.state).toBe('completed');
    expect(charges(order)).toBe(1);
    expect(r.job.data[PARKED_FIELD]).toBeUndefined(); // the attempt that found the answer took its mark off
  });

  it('a forged mark whose re-check delay is negative or not a number parks the job, no hot loop', async () => {
    const order = 'o-forged-mark';
    const { jobId } = await confirmOperation.enqueue(queue, { order, amount: 300_000, recheckMs: 1000 });
    await worker();
    const c = await pendingRequest(order);
    for (const recheckMs of [-5000, Number.NaN]) {
      const job = await parked(jobId, order);
      const before = job.attemptsStarted;
      // Job data is writable by anyone who can add jobs: the mark is checked where it is read.
      await job.updateData({ ...job.data, [PARKED_FIELD]: { id: c.id, recheckMs } });
      await job.promote();
      // A rate over a window: a delay read as it was written woke the job about 200 times a second.
      await new Promise((r) => setTimeout(r, 1500));
      const after = (await queue.getJob(jobId)) as Job;
      expect(after.attemptsStarted - before, `recheckMs ${recheckMs}`).toBeLessThanOrEqual(3);
    }
    await answerConfirmation({ pool, schema: t.schema, id: c.id, approve: true, actor: 'gina', queue: () => queue });
    expect((await settled(queue, jobId, 60_000)).state).toBe('completed');
    expect(charges(order)).toBe(1);
  });

  it("an unanswered request times out: 'deny' becomes a recorded denial, 'fail' a terminal failure; both audited", async () => {
    await worker(2);
    const deny = await confirmOperation.enqueue(queue, {
      order: 'o-t-deny',
      amount: 1,
      timeoutMs: 1500,
      onTimeout: 'deny',
    });
    const fail = await confirmOperation.enqueue(queue, {
      order: 'o-t-fail',
      amount: 1,
      timeoutMs: 1500,
      onTimeout: 'fail',
    });
    const [rd, rf] = await Promise.all([settled(queue, deny.jobId, 60_000), settled(queue, fail.jobId, 60_000)]);
    expect([rd.state, rf.state]).toEqual(['failed', 'failed']);
    const [cd] = await store.of({ operationKey: keyOf('o-t-deny') });
    const [cf] = await store.of({ operationKey: keyOf('o-t-fail') });
    expect(cd).toMatchObject({ status: 'timed_out', onTimeout: 'deny', answeredByType: 'system' });
    expect(cf).toMatchObject({ status: 'timed_out', onTimeout: 'fail', answeredByType: 'system' });
    // deny: ctx.confirm returned a denial, which the processor turned into its failure; fail: ctx.confirm threw.
    expect(await ledger.get(keyOf('o-t-deny'))).toMatchObject({
      status: 'failed',
      error: { code: 'IDEMPOTENCY_CONFIRMATION_TIMED_OUT', name: 'ConfirmationDeniedError' },
    });
    expect(await ledger.get(keyOf('o-t-fail'))).toMatchObject({
      status: 'failed',
      error: { code: 'IDEMPOTENCY_CONFIRMATION_TIMED_OUT', name: 'ConfirmationTimeoutFailure' },
    });
    expect(charges('o-t-deny') + charges('o-t-fail')).toBe(0);
    for (const c of [cd, cf]) {
      await waitFor(
        async () => (await auditRows('resource_id = $1', [c?.id])).some((r) => r.action === 'confirmation.timeout'),
        'the timeout event',
        30_000,
        100,
      );
    }
    expect(await auditRows('resource_id = $1 and action = $2', [cd?.id, 'confirmation.timeout'])).toEqual([
      {
        action: 'confirmation.timeout',
        actor_type: 'system',
        actor_id: 'confirmation-timeout',
        decision: 'deny',
        reason_code: 'IDEMPOTENCY_CONFIRMATION_TIMED_OUT',
      },
    ]);
  });
});
