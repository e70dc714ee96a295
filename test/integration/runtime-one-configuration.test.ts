import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import type { Timeline } from '../../src/audit/timeline.js';
import { createIdempotency } from '../../src/runtime/create-idempotency.js';
import type { IdempotencyOptions } from '../../src/runtime/options.js';
import { chargeOperation } from '../fixtures/operations.js';
import { TestContext, waitFor } from '../helpers/context.js';
import { TEST_KEYRING_SPEC } from '../helpers/keyring.js';

/**
 * One configuration: a whole program (enqueue → worker → audit writer → timeline) moves to its
 * own schema and prefix by changing only its options object. Two runs of the same program, each
 * with its own object, must leave their ledger rows, audit events and BullMQ keys under their own
 * schema and prefix only, and each finds its task's story. The task id is not an identifier (it
 * has spaces), so every event stores it as a keyed reference: a writer or store keyed apart from
 * the workers would make the story empty.
 */
const a = new TestContext('runtime_config_a');
const b = new TestContext('runtime_config_b');

afterAll(async () => {
  await Promise.all([a.teardown(), b.teardown()]);
});

/** The program, written once: everything it knows of where it runs is `options`. */
async function program(options: IdempotencyOptions, order: string, taskId: string) {
  const idem = createIdempotency(options);
  try {
    await idem.migrate();
    const charge = chargeOperation({ queue: 'payments' });
    let commits = 0;
    idem.worker(charge, async (input) => {
      commits++;
      return { chargeId: `ch_${input.order}` };
    });
    const job = await idem.enqueue(charge, { order, amount: 1200 }, { taskId });
    await waitFor(
      async () => (await idem.queue(charge).getJobState(job.jobId)) === 'completed',
      `job ${job.jobId} completed`,
    );
    let story: Timeline | undefined;
    await waitFor(async () => {
      story = await idem.timeline(taskId);
      // The claim's and the completion's events may reach the store in different batches, in
      // either order: the story is whole when both are there.
      return (
        story.events.some((e) => e.action === 'idempotency.completed') &&
        story.attempts.length === 1 &&
        story.attempts[0]?.end === 'completed'
      );
    }, `the story of ${taskId}`);
    return { key: job.idempotencyKey, jobId: job.jobId, commits, story: story as Timeline };
  } finally {
    await idem.close();
  }
}

/** What a schema holds of a key and a task: ledger rows, and audit events about the key. */
async function rowsIn(t: TestContext, schema: string, key: string) {
  const exists = await t.query<{ t: string | null }>('select to_regclass($1) as t', [`${schema}.idempotency_ledger`]);
  if (!exists.rows[0]?.t) return { ledger: 0, events: 0 };
  const ledger = await t.query<{ n: string }>(`select count(*) as n from ${schema}.idempotency_ledger where key = $1`, [
    key,
  ]);
  const events = await t.query<{ n: string }>(
    `select count(*) as n from ${schema}.audit_events where resource_id = $1 or operation_id = $1`,
    [key],
  );
  return { ledger: Number(ledger.rows[0]?.n), events: Number(events.rows[0]?.n) };
}

async function keysUnder(prefix: string, jobId: string): Promise<string[]> {
  const redis = new Redis(a.redisUrl);
  try {
    return await redis.keys(`${prefix}:payments:${jobId}*`);
  } finally {
    await redis.quit();
  }
}

describe('createIdempotency: one configuration', () => {
  it('moves enqueue, worker, audit writer and timeline to their own schema and prefix by the options object alone', async () => {
    const first: IdempotencyOptions = {
      postgres: a.databaseUrl,
      schema: a.schema,
      redis: a.redisUrl,
      prefix: a.prefix,
      keyring: TEST_KEYRING_SPEC,
      audit: { writer: true },
      logger: false,
    };
    const second: IdempotencyOptions = { ...first, schema: b.schema, prefix: b.prefix };

    const one = await program(first, 'o-1', 'support ticket 4821');
    const two = await program(second, 'o-2', 'support ticket 4822');

    expect([one.commits, two.commits]).toEqual([1, 1]);
    // Each story is there, told as the program's own.
    for (const run of [one, two]) {
      expect(run.story.attempts).toHaveLength(1);
      expect(run.story.attempts[0]?.end).toBe('completed');
      expect(run.story.finalStates).toEqual([expect.objectContaining({ key: run.key, status: 'completed' })]);
    }
    // Ledger rows and audit events under the run's own schema only.
    expect(await rowsIn(a, a.schema, one.key)).toEqual({ ledger: 1, events: expect.any(Number) });
    expect((await rowsIn(a, a.schema, one.key)).events).toBeGreaterThanOrEqual(2);
    expect(await rowsIn(a, b.schema, one.key)).toEqual({ ledger: 0, events: 0 });
    expect(await rowsIn(a, b.schema, two.key)).toEqual({ ledger: 1, events: expect.any(Number) });
    expect((await rowsIn(a, b.schema, two.key)).events).toBeGreaterThanOrEqual(2);
    expect(await rowsIn(a, a.schema, two.key)).toEqual({ ledger: 0, events: 0 });
    expect(await rowsIn(a, 'public', one.key)).toEqual({ ledger: 0, events: 0 });
    expect(await rowsIn(a, 'public', two.key)).toEqual({ ledger: 0, events: 0 });
    // BullMQ's keys of each job under the run's own prefix only, none under BullMQ's default.
    expect(await keysUnder(a.prefix, one.jobId)).not.toEqual([]);
    expect(await keysUnder(b.prefix, one.jobId)).toEqual([]);
    expect(await keysUnder(b.prefix, two.jobId)).not.toEqual([]);
    expect(await keysUnder(a.prefix, two.jobId)).toEqual([]);
    expect(await keysUnder('bull', one.jobId)).toEqual([]);
    expect(await keysUnder('bull', two.jobId)).toEqual([]);
    // The task ids were stored as keyed references, never in clear.
    const clear = await a.query<{ n: string }>(
      `select (select count(*) from ${a.schema}.audit_events where task_id like 'support ticket%') +
              (select count(*) from ${b.schema}.audit_events where task_id like 'support ticket%') as n`,
    );
    expect(Number(clear.rows[0]?.n)).toBe(0);
  });
});
