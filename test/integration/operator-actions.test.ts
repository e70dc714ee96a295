/**
 * Operator actions from code: invalidate and resolve record who and why with the transition, so
 * their `user` audit event is in the trail once the writer (or the backfill) has run, whichever
 * path wrote it, stored once.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AuditStore } from '../../src/audit/audit-store.js';
import { eventsForRecord } from '../../src/audit/derive.js';
import { invalidateKey, resolveKey } from '../../src/audit/operator-actions.js';
import { fingerprint } from '../../src/fingerprint/fingerprint.js';
import { runBackfill } from '../../src/jobs/audit-backfill.js';
import { boundedKey } from '../../src/keys/idempotency-key.js';
import type { PostgresLedger } from '../../src/ledger/postgres-ledger.js';
import { bull } from '../helpers/bullmq.js';
import { TestContext, waitFor } from '../helpers/context.js';

const t = new TestContext('operator_actions');
const b = bull(t);
let ledger: PostgresLedger;
let n = 0;

beforeAll(async () => {
  await t.setup();
  ledger = t.ledger();
});
afterAll(async () => {
  await ledger.close();
  await t.teardown();
});

/** A completed key: claimed and completed at epoch 1. */
async function completedKey(downstream: 'idempotent' | 'none' = 'idempotent') {
  const key = { namespace: 'acme/pay', resourceKey: `op:${++n}:${Math.random()}`, version: 'v1' };
  const c = await ledger.claim({
    key,
    operation: 'pay',
    fingerprint: fingerprint('pay', { n }),
    leaseMs: 30_000,
    retentionMs: 60_000,
    downstream,
    jobId: `job-${n}`,
    queue: 'payments',
  });
  if (c.kind !== 'acquired') throw new Error(c.kind);
  return { k: boundedKey(key), epoch: c.epoch };
}

/** The stored user events of a key's transitions (looked up by the ids its ledger record implies). */
async function userEvents(key: string) {
  const record = await ledger.get(key);
  const ids = eventsForRecord(record as NonNullable<typeof record>)
    .filter((e) => e.actorType === 'user')
    .map((e) => e.eventId);
  return (
    await t.query(
      `select event_id, action, actor_type, actor_id, details from ${t.schema}.audit_events
       where event_id = any($1::text[]) order by created_at`,
      [ids],
    )
  ).rows;
}

describe('operator actions from code', () => {
  it('invalidateKey writes the transition and its user event; the backfill adds no second row', async () => {
    const pool = t.pool(2);
    const store = new AuditStore(pool, t.schema);
    const { k, epoch } = await completedKey();
    await ledger.complete(k, epoch, 'ok');
    try {
      const r = await invalidateKey(ledger, k, { actor: 'alice', reason: 'charged twice', store });
      expect(r).toMatchObject({ stored: true, previousStatus: 'completed', epoch: 2 });
      const rows = await userEvents(k);
      expect(rows).toHaveLength(1);
      expect(rows[0]).toMatchObject({
        event_id: r.event.eventId,
        action: 'idempotency.invalidated',
        actor_id: 'alice',
        details: { reason: 'charged twice', via: 'library', previousStatus: 'completed' },
      });
      // The backfill derives the same event from the ledger's record: nothing new is stored.
      const record = await ledger.get(k);
      const derived = eventsForRecord(record as NonNullable<typeof record>);
      expect(derived.map((e) => e.eventId)).toContain(r.event.eventId);
      expect((await store.writeBatch(derived)).inserted).toBe(2); // the claim and completion, never emitted live
      expect(await userEvents(k)).toHaveLength(1);
    } finally {
      await pool.end();
    }
  });

  it('resolveKey refuses a record that is not unknown and audits the one that is', async () => {
    const pool = t.pool(2);
    const store = new AuditStore(pool, t.schema);
    const { k, epoch } = await completedKey();
    try {
      await expect(
        resolveKey(ledger, k, { committed: false }, { actor: 'bob', reason: 'x', store }),
      ).rejects.toMatchObject({ code: 'IDEMPOTENCY_ILLEGAL_TRANSITION' });
      await ledger.markUnknown(k, epoch, { code: 'E_TIMEOUT', message: 'timed out' });
      const r = await resolveKey(ledger, k, { committed: false }, { actor: 'bob', reason: 'no charge found', store });
      expect(r.stored).toBe(true);
      expect(await userEvents(k)).toEqual([
        expect.objectContaining({
          action: 'idempotency.resolved',
          actor_id: 'bob',
          details: { reason: 'no charge found', via: 'library', outcome: 'not_committed' },
        }),
      ]);
      await expect(invalidateKey(ledger, k, { actor: '', reason: 'x' })).rejects.toMatchObject({
        code: 'IDEMPOTENCY_INVALID_INPUT',
      });
    } finally {
      await pool.end();
    }
  });

  it('ledger.invalidate() called from code leaves its user event, written by the backfill and the writer', async () => {
    const auditQueue = b.queue('audit');
    const writer = b.auditWriter('audit', ledger.pool);
    const { k } = await completedKey();
    try {
      const receipt = await ledger.invalidate(k, { actorId: 'cron-job', reason: 'nightly reset' });
      // Nobody wrote an event: the process could have died here.
      expect(await userEvents(k)).toHaveLength(0);
      await runBackfill({ pool: ledger.pool, auditQueue, schema: t.schema, since: new Date(0) });
      await waitFor(async () => (await userEvents(k)).length === 1, 'the invalidation event');
      expect(await userEvents(k)).toEqual([
        expect.objectContaining({
          action: 'idempotency.invalidated',
          actor_id: 'cron-job',
          details: expect.objectContaining({ reason: 'nightly reset', via: 'backfill' }),
        }),
      ]);
      // Without an actor it is still a user event, its actor unknown.
      await ledger.invalidate(k);
      await runBackfill({ pool: ledger.pool, auditQueue, schema: t.schema, since: new Date(0) });
      await waitFor(async () => (await userEvents(k)).length === 2, 'the second invalidation event');
      expect((await userEvents(k)).map((r) => r.actor_id)).toEqual(['cron-job', 'unknown']);
      expect(receipt.epoch).toBe(2);
    } finally {
      await writer.close();
      await auditQueue.close();
    }
  });
});
