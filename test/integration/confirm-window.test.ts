/**
 * A confirmation's timeout is part of the retry window: retention must outlast the wait, or the
 * records the waiting job relies on (its steps, the key) could expire before the answer comes.
 * Refused at definition when `maxConfirmationTimeout` is declared; otherwise `ctx.confirm()`
 * refuses a timeout retention cannot cover, before any request is recorded.
 */
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { answerConfirmation } from '../../src/confirm/answer.js';
import { ConfirmationStore } from '../../src/confirm/confirmation-store.js';
import { IdempotencyConfigError } from '../../src/errors/errors.js';
import { boundedKey } from '../../src/keys/idempotency-key.js';
import type { PostgresLedger } from '../../src/ledger/postgres-ledger.js';
import { defineOperation } from '../../src/operation/define-operation.js';
import type { Duration } from '../../src/operation/duration.js';
import { withIdempotency } from '../../src/worker/with-idempotency.js';
import { bull, settled } from '../helpers/bullmq.js';
import { TestContext, waitFor } from '../helpers/context.js';
import { testKeyring } from '../helpers/keyring.js';

const t = new TestContext('confirm_window');
const b = bull(t);
let pool: pg.Pool;
let ledger: PostgresLedger;
let store: ConfirmationStore;
const closers: (() => Promise<unknown>)[] = [];

const input = z.object({ order: z.string(), timeout: z.string() });

function operation(name: string, retention: Duration, maxConfirmationTimeout?: Duration) {
  return defineOperation({
    name,
    namespace: `acme/${name}`,
    version: 'v1',
    input,
    effect: (i) => ({ order: i.order }),
    resourceKey: (i) => `order:${i.order}`,
    retention,
    lease: '5s',
    downstream: 'idempotent',
    ...(maxConfirmationTimeout === undefined ? {} : { maxConfirmationTimeout }),
  });
}

/** Runs `op` on its own queue, its processor asking for a confirmation with the job's timeout. */
function run(op: ReturnType<typeof operation>) {
  const queue = b.queue(op.name);
  const worker = b.worker(
    op.name,
    withIdempotency(
      op,
      async (i: z.output<typeof input>, ctx) => {
        const answer = await ctx.confirm({
          name: 'large-payment',
          reason: `charge order ${i.order}`,
          timeout: i.timeout as Duration,
          onTimeout: 'deny',
        });
        return { approved: answer.approved };
      },
      { ledger, keyring: testKeyring },
    ),
  );
  closers.push(
    () => worker.close(),
    () => queue.close(),
  );
  return queue;
}

const requestsOf = (op: ReturnType<typeof operation>, order: string) =>
  store.of({ operationKey: boundedKey(op.keyFor(op.parseInput({ order, timeout: '1m' }))) });

beforeAll(async () => {
  await t.setup();
  pool = t.pool();
  ledger = t.ledger();
  store = new ConfirmationStore(pool, t.schema);
});
afterAll(async () => {
  for (const close of closers) await close();
  await ledger.close();
  await pool.end();
  await t.teardown();
});

describe('the retry window counts the confirmation timeout', () => {
  it('refuses at definition a maxConfirmationTimeout that retention cannot cover', () => {
    const err = (() => {
      try {
        operation('w.defined', '1h', '2h');
      } catch (e) {
        return e;
      }
    })();
    expect(err).toBeInstanceOf(IdempotencyConfigError);
    expect((err as IdempotencyConfigError).code).toBe('IDEMPOTENCY_CONFIG');
    expect((err as Error).message).toMatch(/retention 1h .* shorter than its longest retry path/);
    expect(() => operation('w.covered', '3h', '2h')).not.toThrow();
  });

  it('ctx.confirm() refuses a timeout above maxConfirmationTimeout, or one retention cannot cover, before asking', async () => {
    const bounded = operation('w.bounded', '3h', '1h');
    const free = operation('w.free', '1h');
    const [qb, qf] = [run(bounded), run(free)];
    const above = await bounded.enqueue(qb, { order: 'o-1', timeout: '2h' });
    const uncovered = await free.enqueue(qf, { order: 'o-2', timeout: '2h' });
    const covered = await free.enqueue(qf, { order: 'o-3', timeout: '10m' });

    for (const [q, jobId] of [
      [qb, above.jobId],
      [qf, uncovered.jobId],
    ] as const) {
      const r = await settled(q, jobId, 30_000);
      expect(r.state).toBe('failed');
      expect(r.failedReason).toMatch(/^IDEMPOTENCY_CONFIG: /);
    }
    expect(await requestsOf(bounded, 'o-1')).toEqual([]);
    expect(await requestsOf(free, 'o-2')).toEqual([]);

    // Within retention: asked, and answered.
    const [c] = (await waitFor(
      async () => {
        const found = await requestsOf(free, 'o-3');
        return found[0]?.waiters.length ? found : undefined;
      },
      'the covered request',
      30_000,
      50,
    )) as Awaited<ReturnType<typeof requestsOf>>;
    expect(c).toMatchObject({ status: 'pending', timeoutMs: 600_000 });
    await answerConfirmation({
      pool,
      schema: t.schema,
      id: c?.id as string,
      approve: true,
      actor: 'alice',
      queue: () => qf,
    });
    const done = await settled(qf, covered.jobId, 30_000);
    expect(done.state).toBe('completed');
  });
});
