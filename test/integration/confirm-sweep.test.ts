/**
 * The sweeper and confirmation requests: an answer belongs to its operation's ledger record, so
 * the requests of swept operations are deleted with them, never before the audit events of the
 * request and of its answer are stored; a request that waits for an answer is never deleted.
 */
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AuditStore } from '../../src/audit/audit-store.js';
import { confirmationEvent } from '../../src/audit/confirmation-event.js';
import { eventsForRecord } from '../../src/audit/derive.js';
import { answerConfirmation } from '../../src/confirm/answer.js';
import { ConfirmationStore } from '../../src/confirm/confirmation-store.js';
import type { Confirmation } from '../../src/confirm/types.js';
import { sweepLedger } from '../../src/jobs/ledger-sweeper.js';
import { boundedKey } from '../../src/keys/idempotency-key.js';
import type { PostgresLedger } from '../../src/ledger/postgres-ledger.js';
import { TestContext, waitFor } from '../helpers/context.js';

const t = new TestContext('confirm_sweep');
let pool: pg.Pool;
let ledger: PostgresLedger;
let store: ConfirmationStore;
let audit: AuditStore;

/** A completed operation (its transitions' events stored) with a confirmation request of `status`. */
async function operation(
  order: string,
  opts: { retentionMs: number; answer?: 'approve' | 'deny'; storeRequestEvent?: boolean },
): Promise<{ key: string; request: Confirmation }> {
  const key = { namespace: 'acme/pay', resourceKey: `order:${order}`, version: 'v1' };
  const k = boundedKey(key);
  const claim = await ledger.claim({
    key,
    operation: 'payments.charge',
    fingerprint: `fp-${order}`,
    leaseMs: 10_000,
    retentionMs: opts.retentionMs,
    downstream: 'idempotent',
  });
  if (claim.kind !== 'acquired') throw new Error(`seed ${order}: ${claim.kind}`);
  const request = await store.request({
    operationKey: k,
    name: 'large-payment',
    operation: 'payments.charge',
    reason: `charge order ${order}`,
    onTimeout: 'deny',
    timeoutMs: 3_600_000,
    epoch: claim.epoch,
  });
  if (opts.storeRequestEvent !== false) await audit.writeBatch([confirmationEvent('requested', request)]);
  // The answer's event is written by answerConfirmation before it returns.
  if (opts.answer) {
    await answerConfirmation({
      pool,
      schema: t.schema,
      id: request.id,
      approve: opts.answer === 'approve',
      actor: 'alice',
    });
    await ledger.complete(k, claim.epoch, { ok: true });
  } else {
    await ledger.release(k, claim.epoch);
  }
  const record = await ledger.get(k);
  if (!record) throw new Error(`no record of ${order}`);
  await audit.writeBatch(eventsForRecord(record));
  return { key: k, request };
}

const exists = async (c: Confirmation) => (await store.of({ operationKey: c.operationKey })).length === 1;

beforeAll(async () => {
  await t.setup();
  pool = t.pool();
  ledger = t.ledger();
  store = new ConfirmationStore(pool, t.schema);
  audit = new AuditStore(pool, t.schema);
});
afterAll(async () => {
  await ledger.close();
  await pool.end();
  await t.teardown();
});

describe('sweeping confirmation requests', () => {
  it('go with their swept operation once their events are stored; pending ones and live operations stay', async () => {
    const swept = await operation('s-1', { retentionMs: 1, answer: 'approve' });
    const unstored = await operation('s-2', { retentionMs: 1, answer: 'deny', storeRequestEvent: false });
    const waiting = await operation('s-3', { retentionMs: 1 });
    const live = await operation('s-4', { retentionMs: 3_600_000, answer: 'approve' });
    await waitFor(
      async () =>
        (
          await t.query(`select count(*)::int as n from ${t.schema}.idempotency_ledger
            where status in ('completed', 'released') and updated_at + retention_ms * interval '1 millisecond' <= now()`)
        ).rows[0]?.n === 3,
      'three records to expire',
      10_000,
      20,
    );

    const first = await sweepLedger(ledger, { batchSize: 1 });
    expect(first).toMatchObject({ deleted: 3, pending: 0, confirmations: { deleted: 1, pending: 1 } });
    expect(await ledger.get(swept.key)).toBeNull();
    expect(await exists(swept.request)).toBe(false);
    // Its request event is not stored: kept until it is.
    expect(await exists(unstored.request)).toBe(true);
    // Waiting for an answer: never swept, though its operation's record has gone.
    expect(await ledger.get(waiting.key)).toBeNull();
    expect(await store.get(waiting.request.id)).toMatchObject({ status: 'pending' });
    // Its operation is still recorded: the answer stays with it.
    expect(await ledger.get(live.key)).not.toBeNull();
    expect(await exists(live.request)).toBe(true);

    await audit.writeBatch([confirmationEvent('requested', unstored.request)]);
    const second = await sweepLedger(ledger);
    expect(second.confirmations).toEqual({ deleted: 1, pending: 0 });
    expect(await exists(unstored.request)).toBe(false);
    expect(await exists(waiting.request)).toBe(true);
    expect(await exists(live.request)).toBe(true);
  });
});
