/**
 * A connection pooler in transaction mode (pgbouncer 1.18, as Debian ships it) hands each
 * transaction whichever server connection is free: a named prepared statement made on one is
 * missing on the next. With `preparedStatements: false` every path of the ledger, the audit store
 * and a real worker goes through it; with the default, the failure names the option.
 * Migrations run directly against Postgres (their lock is a session's).
 */

import { existsSync } from 'node:fs';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { z } from 'zod';
import { AuditStore } from '../../src/audit/audit-store.js';
import { transitionEventIds } from '../../src/audit/derive.js';
import { IdempotencyConfigError } from '../../src/errors/errors.js';
import type { ClaimOptions } from '../../src/ledger/types.js';
import type { Operation } from '../../src/operation/operation.js';
import { type CommitCountingServer, postEffect, startCommitCounter } from '../../src/testing/index.js';
import { withIdempotency } from '../../src/worker/with-idempotency.js';
import { chargeInput, chargeOperation } from '../fixtures/operations.js';
import { sampleAuditEvent } from '../helpers/audit-sample.js';
import { bull, settled } from '../helpers/bullmq.js';
import { TestContext } from '../helpers/context.js';
import { testKeyring } from '../helpers/keyring.js';
import { machineHas } from '../helpers/machine.js';
import { PGBOUNCER, Pgbouncer } from '../helpers/pgbouncer.js';

const t = new TestContext('poolers');
const b = bull(t);
let bouncer: Pgbouncer | undefined;

const ready = machineHas(
  'test/processes/poolers.test.ts',
  'pgbouncer',
  existsSync(PGBOUNCER),
  'apt-get install pgbouncer',
);

beforeAll(async () => {
  await t.setup(); // directly against Postgres
  if (ready) bouncer = await Pgbouncer.start({ poolMode: 'transaction', poolSize: 4 });
});
afterAll(async () => {
  // First: its server connections carry this file's application_name, which teardown checks.
  await bouncer?.stop();
  await t.teardown();
});

const through = () => (bouncer as Pgbouncer).url(t.tag);

function claimOf(id: string, fingerprint = 'fp-1'): ClaimOptions {
  return {
    key: { namespace: 'test/poolers', resourceKey: id, version: 'v1' },
    operation: 'poolers.test',
    fingerprint,
    leaseMs: 10_000,
    retentionMs: 60_000,
    downstream: 'idempotent',
  };
}

/** Runs `op(i)` for i in 0..count-1, `concurrency` at a time; resolves to each outcome. */
async function pooled<T>(count: number, concurrency: number, op: (i: number) => Promise<T>) {
  const out: PromiseSettledResult<T>[] = new Array(count);
  let next = 0;
  const loop = async () => {
    while (next < count) {
      const i = next++;
      out[i] = await op(i).then(
        (value) => ({ status: 'fulfilled', value }) as const,
        (reason: unknown) => ({ status: 'rejected', reason }) as const,
      );
    }
  };
  await Promise.all(Array.from({ length: concurrency }, loop));
  return out;
}

const values = <T>(results: PromiseSettledResult<T>[]) =>
  results.map((r) => {
    if (r.status === 'rejected') throw r.reason;
    return r.value;
  });

describe.runIf(ready).each([
  { name: 'batched', batching: undefined },
  { name: 'one statement per call', batching: false as const },
])('the ledger through pgbouncer in transaction mode, preparedStatements: false ($name)', ({ name, batching }) => {
  const run = name.replace(/\W/g, '_');
  const unnamed = () =>
    t.ledger({
      connectionString: through(),
      preparedStatements: false,
      poolSize: 20,
      ...(batching === false ? { batching } : {}),
    });

  it('200 keys, 20 at a time: claim, complete, replay, conflict', async () => {
    const ledger = unnamed();
    try {
      const claims = values(await pooled(200, 20, (i) => ledger.claim(claimOf(`${run}-${i}`))));
      expect(claims.every((c) => c.kind === 'acquired')).toBe(true);
      values(
        await pooled(200, 20, async (i) => {
          const c = claims[i];
          if (c?.kind !== 'acquired') throw new Error('not acquired');
          return ledger.complete(c.key, c.epoch, { n: i });
        }),
      );
      const replays = values(await pooled(200, 20, (i) => ledger.claim(claimOf(`${run}-${i}`))));
      expect(replays.map((r) => (r.kind === 'completed' ? r.result : r.kind))).toEqual(
        Array.from({ length: 200 }, (_, i) => ({ n: i })),
      );
      const conflicts = values(await pooled(200, 20, (i) => ledger.claim(claimOf(`${run}-${i}`, 'fp-2'))));
      expect(conflicts.every((c) => c.kind === 'conflict')).toBe(true);
      const rows = await t.query<{ n: string }>(
        `select count(*) as n from ${t.schema}.idempotency_ledger where key like $1 and status = 'completed'`,
        [`%${run}-%`],
      );
      expect(Number(rows.rows[0]?.n)).toBe(200);
    } finally {
      await ledger.close();
    }
  });

  it('20 concurrent claims of one key: exactly one acquires; heartbeat, unknown, resolve, invalidate, sweep', async () => {
    const ledger = unnamed();
    try {
      const claims = values(await pooled(20, 20, () => ledger.claim(claimOf(`${run}-one`))));
      const acquired = claims.filter((c) => c.kind === 'acquired');
      expect(acquired).toHaveLength(1);
      expect(claims.filter((c) => c.kind === 'inProgress')).toHaveLength(19);
      const a = acquired[0];
      if (a?.kind !== 'acquired') throw new Error('not acquired');
      await ledger.heartbeat(a.key, a.epoch, 10_000);
      await ledger.markUnknown(a.key, a.epoch, { code: 'TIMEOUT', message: 'no answer' });
      await ledger.resolve(a.key, { committed: true, result: { found: true } });
      expect((await ledger.get(a.key))?.status).toBe('completed');
      await ledger.invalidate(a.key);
      // Invalidated now, with a 60 s retention: the sweep's statements run through the pooler and
      // find nothing expired; the row stays.
      expect(await ledger.sweepPage(10, undefined, transitionEventIds)).toMatchObject({ deleted: 0, pending: [] });
      expect((await ledger.get(a.key))?.status).toBe('invalidated');
    } finally {
      await ledger.close();
    }
  });
});

describe.runIf(ready)('the default (named prepared statements) through pgbouncer in transaction mode', () => {
  it('fails with an IdempotencyConfigError that names preparedStatements', async () => {
    const ledger = t.ledger({ connectionString: through(), poolSize: 10, batching: false });
    try {
      const results = await pooled(200, 20, (i) => ledger.claim(claimOf(`named-${i}`)));
      const errors = results.flatMap((r) => (r.status === 'rejected' ? [r.reason as Error] : []));
      expect(errors.length).toBeGreaterThan(0);
      for (const err of errors) {
        expect(err).toBeInstanceOf(IdempotencyConfigError);
        expect((err as IdempotencyConfigError).details).toMatchObject({
          option: 'preparedStatements',
          sqlState: expect.stringMatching(/^(42P05|26000)$/),
        });
        expect(err.message).toContain('preparedStatements: false');
      }
    } finally {
      await ledger.close();
    }
  });

  it('the audit store too', async () => {
    const pool = new pg.Pool({ connectionString: through(), max: 10 });
    try {
      const store = new AuditStore(pool, t.schema);
      const results = await pooled(100, 20, (i) => store.writeBatch([auditEvent(`named-${i}`)]));
      const errors = results.flatMap((r) => (r.status === 'rejected' ? [r.reason as Error] : []));
      expect(errors.length).toBeGreaterThan(0);
      for (const err of errors) {
        expect(err).toBeInstanceOf(IdempotencyConfigError);
        expect(err.message).toContain('preparedStatements: false');
      }
    } finally {
      await pool.end();
    }
  });
});

const auditEvent = (id: string) => sampleAuditEvent('poolers-test', id);

describe.runIf(ready)('through pgbouncer in transaction mode with preparedStatements: false', () => {
  it('the audit store writes batches', async () => {
    const bounced = new pg.Pool({ connectionString: through(), max: 10 });
    try {
      const store = new AuditStore(bounced, t.schema, undefined, { preparedStatements: false });
      const results = values(await pooled(100, 20, (i) => store.writeBatch([auditEvent(`unnamed-${i}`)])));
      expect(results.reduce((n, r) => n + r.inserted, 0)).toBe(100);
    } finally {
      await bounced.end();
    }
  });

  it('a withIdempotency worker runs 200 jobs at concurrency 20: 200 commits, then 200 replays', async () => {
    const ds: CommitCountingServer = await startCommitCounter();
    const ledger = t.ledger({ connectionString: through(), preparedStatements: false, poolSize: 20 });
    try {
      const input = chargeInput;
      const o = chargeOperation({ namespace: 'acme/poolers.charge', lease: '10s' }) as unknown as Operation<
        typeof input,
        { effectId: string }
      >;
      const q = b.queue('charges');
      const w = b.worker(
        'charges',
        withIdempotency(
          o,
          async (i: z.output<typeof input>, ctx: { idempotencyKey: string; signal: AbortSignal }) => {
            const res = await postEffect<{ id: string }>(
              ds.url,
              { order: i.order, amount: i.amount },
              ctx.idempotencyKey,
              ctx.signal,
            );
            return { effectId: res.body.id };
          },
          { ledger, keyring: testKeyring },
        ),
        { concurrency: 20 },
      );
      const batch = (trace: string) =>
        Array.from({ length: 200 }, (_, i) => ({
          name: 'charge',
          data: { order: `o-${i}`, amount: i + 1, traceId: trace },
        }));
      const first = await q.addBulk(batch('first'));
      const done = await Promise.all(first.map((j) => settled(q, j.id as string, 60_000)));
      expect(done.filter((r) => r.state !== 'completed').map((r) => r.failedReason)).toEqual([]);
      expect(ds.commits).toBe(200);
      // The same operations again (new job ids): replayed from the ledger, nothing committed twice.
      const again = await q.addBulk(batch('again'));
      const replayed = await Promise.all(again.map((j) => settled(q, j.id as string, 60_000)));
      expect(replayed.every((r) => r.state === 'completed')).toBe(true);
      expect(replayed.map((r) => JSON.stringify(r.returnvalue))).toEqual(
        done.map((r) => JSON.stringify(r.returnvalue)),
      );
      expect(ds.commits).toBe(200);
      await w.close();
      await q.close();
    } finally {
      await ledger.close();
      await ds.close();
    }
  });
});
