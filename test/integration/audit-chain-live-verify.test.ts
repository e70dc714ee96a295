import type pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { AuditStore } from '../../src/audit/audit-store.js';
import { createAuditPartitions } from '../../src/audit/partitions.js';
import { verifyAuditChains } from '../../src/audit/verify-chain.js';
import { defineRedactionPolicy } from '../../src/redaction/define-policy.js';
import { sampleAuditEvent } from '../helpers/audit-sample.js';
import { TestContext } from '../helpers/context.js';

/*
 * `verify` on a trail that writers keep appending to: what it reads must be one moment of the
 * trail. Read as it was (the heads, then the events, each in a statement of its own), a batch
 * stored between the two looks like events past their chain's head.
 */

const t = new TestContext('audit-chain-live-verify');
let pool: pg.Pool;
let writerPool: pg.Pool;
const policy = defineRedactionPolicy({
  version: 'chain-live-1',
  hmacKeys: [{ id: 'k1', secret: 'an-audit-chain-live-verify-key-of-32-bytes' }],
});
const batch = (from: number) =>
  Array.from({ length: 20 }, (_, i) => ({
    ...sampleAuditEvent('chain-live', String(from + i)),
    createdAt: new Date().toISOString(),
  }));

beforeAll(async () => {
  await t.setup();
  pool = t.pool(4);
  writerPool = t.pool(2);
  await createAuditPartitions(pool, t.schema, new Date(Date.now() - 86_400_000), new Date(Date.now() + 2 * 86_400_000));
});

afterAll(async () => {
  await pool?.end();
  await writerPool?.end();
  await t.teardown();
});

/** The pool, with a writer that stores a batch right after each read of the chains' heads (through its own sessions). */
function withWriterAfterHeads(store: AuditStore, from: () => number): pg.Pool {
  const heads = new RegExp(`from ${t.schema}\\.audit_chains\\b`);
  const after = async <R>(text: unknown, result: R): Promise<R> => {
    if (typeof text === 'string' && heads.test(text)) await store.writeBatch(batch(from()));
    return result;
  };
  return new Proxy(pool, {
    get(target, prop, receiver) {
      if (prop === 'query') {
        return async (text: string, values?: unknown[]) => after(text, await target.query(text, values));
      }
      if (prop === 'connect') {
        return async () => {
          const client = await target.connect();
          return new Proxy(client, {
            get(c, p, r) {
              if (p !== 'query') return Reflect.get(c, p, r);
              return async (text: string, values?: unknown[]) => after(text, await c.query(text, values));
            },
          });
        };
      }
      return Reflect.get(target, prop, receiver);
    },
  });
}

it('finds nothing wrong in a trail written to while it is walked, and then finds the new events chained too', async () => {
  const store = new AuditStore(writerPool, t.schema, policy);
  await store.writeBatch(batch(0));
  let next = 1000;
  const live = withWriterAfterHeads(store, () => (next += 100));
  const during = await verifyAuditChains(live, t.schema);
  expect(during.problems).toEqual([]);
  expect(during.ok).toBe(true);
  expect(next).toBeGreaterThan(1000); // batches were stored while it walked
  const stored = Number((await pool.query(`select count(*) from ${t.schema}.audit_events`)).rows[0].count);
  expect(stored).toBeGreaterThan(20);
  const afterwards = await verifyAuditChains(pool, t.schema);
  expect(afterwards.problems).toEqual([]);
  expect(afterwards.events).toBe(stored);
});
