/**
 * The audit trail after SIGKILLs: three worker processes, each sending its events through a real
 * AuditEmitter (batched every second, so a kill loses what it buffers), SIGKILLed at random and
 * started again while a few hundred intents run, and killed once more at the end. After the
 * backfill, every transition in every row's record of transitions has exactly one stored audit
 * event, for every epoch, and no event id is stored twice; the timeline of each operation that
 * was taken over tells every epoch's attempt, its end, and the final state.
 */
import { Queue } from 'bullmq';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AuditStore } from '../../src/audit/audit-store.js';
import { eventsForRecord } from '../../src/audit/derive.js';
import { LEDGER_TRANSITIONS } from '../../src/audit/from-wrapper.js';
import { timeline } from '../../src/audit/timeline.js';
import { auditPolicyFor } from '../../src/config/audit-policy.js';
import { runBackfill } from '../../src/jobs/audit-backfill.js';
import { createAuditWriter } from '../../src/jobs/audit-writer.js';
import { toRecord } from '../../src/ledger/ledger-record.js';
import { TRANSITIONS } from '../../src/ledger/transitions.js';
import { type CommitCountingServer, startCommitCounter } from '../../src/testing/index.js';
import { TestContext, waitFor } from '../helpers/context.js';
import type { CrashWorker } from '../helpers/crash-worker.js';
import { testKeyring } from '../helpers/keyring.js';
import { chaosWorkerConfig, runKillChaos } from '../helpers/kill-chaos.js';

const t = new TestContext('chaos_audit');
const INTENTS = 200;
const KILLS = 4;
let ds: CommitCountingServer;
let pool: ReturnType<TestContext['pool']>;

beforeAll(async () => {
  await t.setup();
  pool = t.pool();
  ds = await startCommitCounter({ delayMs: 300 });
});
afterAll(async () => {
  await ds?.close();
  await pool?.end();
  await t.teardown();
});

/** Waits until the audit queue holds no batch still to write. */
async function drained(queue: Queue): Promise<void> {
  await waitFor(
    async () => {
      const c = await queue.getJobCounts('waiting', 'active', 'delayed', 'prioritized', 'wait');
      return Object.values(c).every((n) => n === 0);
    },
    'the audit queue to drain',
    60_000,
    100,
  );
}

/** How many of `ids` are stored, and how many are stored more than once. */
async function storedCounts(ids: string[]): Promise<{ stored: number; twice: number }> {
  const rows = await t.query<{ n: number }>(
    `select count(*)::int as n from ${t.schema}.audit_events where event_id = any($1) group by event_id`,
    [ids],
  );
  return { stored: rows.rows.length, twice: rows.rows.filter((r) => r.n > 1).length };
}

describe('the audit trail after workers are SIGKILLed at random', () => {
  it(`${INTENTS} intents: after the backfill every recorded transition of every epoch has exactly one event; no id stored twice`, async () => {
    const auditQueueName = 'chaos-audit';
    const config = chaosWorkerConfig({
      databaseUrl: t.databaseUrl,
      redisUrl: t.redisUrl,
      schema: t.schema,
      prefix: t.prefix,
      queue: 'chaos-charges',
      downstreamUrl: ds.url,
      audit: { queue: auditQueueName, maxDelayMs: 1_000 },
    });
    const connection = { url: t.redisUrl };
    const queue = new Queue(config.queue, { connection, prefix: t.prefix });
    const auditQueue = new Queue(auditQueueName, { connection, prefix: t.prefix });
    const writer = createAuditWriter({
      connection,
      pool,
      schema: t.schema,
      prefix: t.prefix,
      queueName: auditQueueName,
      redactionPolicy: auditPolicyFor(testKeyring),
    });
    const workers: CrashWorker[] = [];
    try {
      const kills = await runKillChaos({
        config,
        queue,
        name: 'audit-chaos',
        intents: INTENTS,
        kills: KILLS,
        ds,
        workers,
      });
      expect(kills).toBe(KILLS);
      expect(await queue.getCompletedCount()).toBe(INTENTS);
      // The last events of every worker die with it too.
      for (const w of workers) await w.kill();

      // What the ledger recorded: every transition of every epoch of every row.
      const rows = (await t.query(`select * from ${t.schema}.idempotency_ledger`)).rows.map(toRecord);
      expect(rows).toHaveLength(INTENTS);
      let transitions = 0;
      for (const r of rows) {
        expect(r.transitions).not.toBeNull();
        transitions += r.transitions?.length ?? 0;
        // Every epoch the row went through is in its record.
        const epochs = [...new Set(r.transitions?.map((x) => x.epoch))].sort((a, b) => a - b);
        expect(epochs).toEqual(Array.from({ length: r.epoch }, (_, i) => i + 1));
      }
      expect(rows.filter((r) => r.epoch > 1).length).toBeGreaterThan(0); // kills led to takeovers
      const ids = rows.flatMap((r) => eventsForRecord(r).map((e) => e.eventId));
      expect(ids).toHaveLength(transitions);
      expect(new Set(ids).size).toBe(transitions);

      await drained(auditQueue);
      const live = await storedCounts(ids);
      await runBackfill({ pool, auditQueue, schema: t.schema });
      await drained(auditQueue);
      const after = await storedCounts(ids);
      console.info(
        `chaos audit: ${transitions} transitions, ${live.stored} stored live, ${after.stored - live.stored} by the backfill`,
      );
      expect(after).toEqual({ stored: transitions, twice: 0 });
      // No event id stored twice anywhere in the trail, and no transition event beyond the record's.
      const twice = await t.query(
        `select event_id from ${t.schema}.audit_events group by event_id having count(*) > 1`,
      );
      expect(twice.rows).toEqual([]);
      const transitionActions = [...LEDGER_TRANSITIONS].map((e) => `idempotency.${e}`);
      const stored = await t.query<{ n: number }>(
        `select count(*)::int as n from ${t.schema}.audit_events where action = any($1)`,
        [transitionActions],
      );
      expect(stored.rows[0]?.n).toBe(transitions);
      const dead = await t.query<{ n: number }>(`select count(*)::int as n from ${t.schema}.audit_dead_letter`);
      expect(dead.rows[0]?.n).toBe(0);

      // The timeline of every operation that was taken over tells each epoch's attempt, how each
      // ended, and the final state.
      const store = new AuditStore(pool, t.schema);
      const ledger = t.ledger();
      try {
        const takenOver = rows.filter((r) => r.epoch > 1);
        for (const r of takenOver) {
          const story = await timeline({ operationKey: r.key }, { store, ledger });
          const claims = (r.transitions ?? []).filter((x) => TRANSITIONS[x.transition].startsAttempt);
          expect(story.attempts.map((a) => a.epoch)).toEqual(claims.map((x) => x.epoch));
          expect(story.attempts.every((a) => a.end !== undefined)).toBe(true);
          expect(story.attempts.at(-1)?.end).toBe('completed');
          expect(story.finalStates).toEqual([{ key: r.key, status: 'completed', epoch: r.epoch, stepId: null }]);
        }
      } finally {
        await ledger.close();
      }
    } finally {
      for (const w of workers) await w.kill().catch(() => {});
      await writer.close();
      await queue.close();
      await auditQueue.close();
    }
  }, 200_000);
});
