/**
 * Only BullMQ's own signals pass unsealed, recognised as BullMQ 6.7 recognises them: rate limiting
 * by its constant message alone. An HTTP SDK's 429 error named `RateLimitError`, BullMQ's
 * `RateLimitError` class with another message, a Proxy whose traps ignore writes and an error whose
 * properties cannot be written all fail the job like any error: with their text sealed in
 * `failedReason`, `stacktrace`, the events stream and what `failed` listeners receive.
 */
import { randomBytes } from 'node:crypto';
import { inspect } from 'node:util';
import { type Job, type Queue, RateLimitError } from 'bullmq';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineKeyring } from '../../src/sealing/keyring.js';
import { originalError } from '../../src/sealing/original-error.js';
import { bullmqSignal } from '../../src/shared/bullmq.js';
import { withIdempotency } from '../../src/worker/with-idempotency.js';
import { testOperation } from '../fixtures/operations.js';
import { settled } from '../helpers/bullmq.js';
import { dumpPostgres, dumpRedis, plaintextFound } from '../helpers/stores.js';
import { wrapperFile } from '../helpers/wrapper-file.js';

const { t, b, ledger: fileLedger, closeAfter } = wrapperFile('signal_lookalikes');

const fresh = (tag: string) => `${tag}${randomBytes(18).toString('base64url')}`;

/** An SDK's 429 error, named as many are. */
class SdkRateLimitError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'RateLimitError';
  }
}

describe('errors that look like BullMQ signals', () => {
  it('recognises rate limiting by message only, and never a Proxy or a getter', () => {
    expect(bullmqSignal(new RateLimitError())).toBe('wait');
    expect(bullmqSignal(new SdkRateLimitError('429 Too Many Requests'))).toBeNull();
    expect(bullmqSignal(new RateLimitError('429 Too Many Requests'))).toBeNull();
    const named = new Error('x');
    named.name = 'DelayedError';
    expect(bullmqSignal(named)).toBe('wait'); // BullMQ's worker takes this name as delayed
    const getter = new Error('x');
    Object.defineProperty(getter, 'name', { get: () => 'DelayedError' });
    expect(bullmqSignal(getter)).toBeNull();
    expect(bullmqSignal(new Proxy(new RateLimitError(), {}))).toBeNull();
  });

  it('fail the job with their text sealed everywhere BullMQ keeps or tells it', async () => {
    const keyring = defineKeyring({ keys: [{ id: 'k1', secret: randomBytes(32) }] });
    const s = {
      sdk: fresh('sdk429_'),
      klass: fresh('klass_'),
      proxy: fresh('proxy_'),
      locked: fresh('locked_'),
    };
    const throwers: Record<string, () => never> = {
      sdk: () => {
        throw new SdkRateLimitError(`429 for api key ${s.sdk}`);
      },
      klass: () => {
        throw new RateLimitError(`slow down ${s.klass}`);
      },
      proxy: () => {
        // Traps that ignore every write: rewriting it in place leaves the raw text.
        throw new Proxy(new Error(`proxied ${s.proxy}`), {
          set: () => true,
          defineProperty: () => true,
          deleteProperty: () => true,
        });
      },
      locked: () => {
        const e = new Error(`locked ${s.locked}`);
        for (const p of ['message', 'stack', 'name']) {
          Object.defineProperty(e, p, {
            value: (e as unknown as Record<string, unknown>)[p],
            writable: false,
            configurable: false,
          });
        }
        throw Object.preventExtensions(e);
      },
    };
    const operation = testOperation({
      name: 'lookalike.run',
      input: z.object({ id: z.string() }),
      effect: (i) => i,
      resourceKey: (i) => `r:${i.id}`,
    });
    const q: Queue = b.queue('lookalike');
    closeAfter(q);
    const w = b.worker(
      'lookalike',
      withIdempotency(operation, async (i) => (throwers[i.id] as () => never)(), { ledger: fileLedger(), keyring }),
    );
    closeAfter(w);
    const told: { job: Job | undefined; err: Error }[] = [];
    w.on('failed', (job, err) => told.push({ job, err }));

    const results = new Map<string, Awaited<ReturnType<typeof settled>>>();
    for (const id of Object.keys(throwers))
      results.set(id, await settled(q, (await operation.enqueue(q, { id })).jobId));

    for (const [id, r] of results) expect(r.state, id).toBe('failed');
    expect(results.get('sdk')?.failedReason).toMatch(
      /^RateLimitError: sealed message, \d+ bytes; open it with BQI_KEYRING set: /,
    );
    const all = Object.values(s);
    expect(plaintextFound(await dumpRedis(t), all)).toEqual([]);
    expect(plaintextFound(await dumpPostgres(t), all)).toEqual([]);
    expect(told).toHaveLength(4);
    for (const { err } of told) {
      expect(
        plaintextFound(`${err.message}\n${err.stack}\n${JSON.stringify(err)}\n${inspect(err, { depth: 8 })}`, all),
      ).toEqual([]);
    }
    // In this process, the error thrown is still there, each one with its own text.
    const originals = told.map((x) =>
      plaintextFound(String((originalError(x.err) as Error | undefined)?.message), all),
    );
    expect(originals.map((found) => found.length)).toEqual([1, 1, 1, 1]);
  });

  it('a Proxy whose every trap throws, against a downstream that cannot dedupe: unknown, unrecoverable, sealed', async () => {
    const keyring = defineKeyring({ keys: [{ id: 'k1', secret: randomBytes(32) }] });
    const secret = fresh('hostile_');
    const operation = testOperation({
      name: 'hostile.run',
      input: z.object({ id: z.string() }),
      effect: (i) => i,
      resourceKey: (i) => `r:${i.id}`,
      downstream: 'none',
    });
    const q: Queue = closeAfter(b.queue('hostile'));
    closeAfter(
      b.worker(
        'hostile',
        withIdempotency(
          operation,
          async () => {
            const trap = () => {
              throw new Error(`trap ${secret}`);
            };
            throw new Proxy(new Error(`hostile ${secret}`), {
              get: trap,
              getPrototypeOf: trap,
              has: trap,
              ownKeys: trap,
            });
          },
          { ledger: fileLedger(), keyring },
        ),
      ),
    );
    const r = await settled(q, (await operation.enqueue(q, { id: 'h' }, { jobOptions: { attempts: 3 } })).jobId);
    expect(r.state).toBe('failed');
    expect(r.job.attemptsMade).toBe(1); // unrecoverable: no blind retry of an effect that may have run
    expect(r.failedReason).toMatch(/^IDEMPOTENCY_UNKNOWN_OUTCOME: /);
    expect((await fileLedger().get(operation.keyFor({ id: 'h' })))?.status).toBe('unknown');
    expect(plaintextFound(await dumpRedis(t), [secret])).toEqual([]);
    expect(plaintextFound(await dumpPostgres(t), [secret])).toEqual([]);
  });
});
