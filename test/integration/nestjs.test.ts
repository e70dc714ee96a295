/**
 * NestJS (`@nestjs/bullmq`): a `WorkerHost` whose `process` is the runtime's processor
 * (`idem.processor()`) forwards job, token and signal, so duplicate jobs of one key wait for the
 * first one and replay it: one commit at a real HTTP downstream, no job failed. A `process(job)`
 * that passes on the job alone (as the usual examples write it) is refused on its first job with
 * `IDEMPOTENCY_CONFIG` (option `token`), before anything runs, instead of failing the duplicates
 * with `IDEMPOTENCY_IN_PROGRESS`.
 *
 * The decorators are applied as functions (`Processor(...)(Class)`, `Module(...)(Class)`): the
 * project compiles without `experimentalDecorators`; an application's `@Processor(...)` does the same.
 */
import 'reflect-metadata';
import { BullModule, Processor, WorkerHost } from '@nestjs/bullmq';
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import type { Job, Queue } from 'bullmq';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isIdempotencyError } from '../../src/errors/idempotency-error.js';
import type { Idempotency } from '../../src/runtime/create-idempotency.js';
import type { IdempotentBullProcessor } from '../../src/runtime/runtime-types.js';
import { originalError } from '../../src/sealing/original-error.js';
import { unseal } from '../../src/sealing/sealed-result.js';
import { type CommitCountingServer, postEffect, startCommitCounter } from '../../src/testing/index.js';
import { chargeOperation } from '../fixtures/operations.js';
import { settled } from '../helpers/bullmq.js';
import { TestContext } from '../helpers/context.js';
import { testKeyring } from '../helpers/keyring.js';
import { testRuntime } from '../helpers/runtime.js';

const t = new TestContext('nestjs');
let idem: Idempotency;
let ds: CommitCountingServer;

beforeAll(async () => {
  idem = testRuntime(t);
  await idem.migrate();
  // Commits every request (keys not honoured) and answers late: duplicates overlap the first.
  ds = await startCommitCounter({ honourIdempotencyKey: false, delayMs: 300 });
});
afterAll(async () => {
  await ds.close();
  await idem.close();
  await t.teardown();
});

type Charged = { chargeId: string };
const IDEMPOTENCY = Symbol('IDEMPOTENCY');

/** An application module: BullMQ on the runtime's connection and prefix, one queue, one processor class. */
function appModule(queue: string, host: new (idem: Idempotency) => WorkerHost) {
  Processor(queue, { concurrency: 4 })(host);
  class AppModule {}
  Module({
    imports: [
      BullModule.forRoot({ connection: idem.connection, prefix: idem.prefix }),
      BullModule.registerQueue({ name: queue }),
    ],
    providers: [
      { provide: IDEMPOTENCY, useValue: idem },
      { provide: host, useFactory: (i: Idempotency) => new host(i), inject: [IDEMPOTENCY] },
    ],
  })(AppModule);
  return AppModule;
}

/** Four jobs of one intent, added as a producer unaware of keys adds them: one key, four jobs. */
async function fourDuplicates(q: Queue, order: string): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < 4; i++) ids.push((await q.add('charge', { order, amount: 1200 })).id as string);
  return ids;
}

describe('a NestJS WorkerHost on the runtime', () => {
  it('`process` as idem.processor(): 4 duplicate jobs of one key → 1 commit, every job completed, one result', async () => {
    const charge = chargeOperation<Charged>({ queue: 'nest-charges' });
    const url = ds.url;
    class ChargeProcessor extends WorkerHost {
      // The runtime's processor is `process` itself: BullMQ calls it with (job, token, signal).
      override readonly process: IdempotentBullProcessor<Charged, never>;
      constructor(runtime: Idempotency) {
        super();
        this.process = runtime.processor(charge, async (input, ctx) => {
          const res = await postEffect<{ id: string }>(url, input, ctx.idempotencyKey, ctx.signal);
          return { chargeId: res.body.id };
        });
      }
    }
    const app = await NestFactory.createApplicationContext(appModule('nest-charges', ChargeProcessor), {
      logger: false,
    });
    try {
      const q = idem.queue(charge);
      const ids = await fourDuplicates(q, 'N-1');
      const done = await Promise.all(ids.map((id) => settled(q, id, 30_000)));
      expect(done.map((d) => [d.state, d.failedReason])).toEqual(ids.map(() => ['completed', undefined]));
      expect(ds.commitsFor({ order: 'N-1' })).toBe(1);
      const results = done.map((d) => unseal<Charged>(d.returnvalue, testKeyring).chargeId);
      expect(new Set(results).size).toBe(1);
    } finally {
      await app.close();
    }
  });

  it("BullMQ's signal reaches ctx.signal: a job cancelled with worker.cancelJob() aborts the downstream call", async () => {
    const charge = chargeOperation<Charged>({ queue: 'nest-cancel' });
    const url = ds.url;
    const seen: { aborted: boolean; reason: unknown }[] = [];
    class ChargeProcessor extends WorkerHost {
      override readonly process: IdempotentBullProcessor<Charged, never>;
      constructor(runtime: Idempotency) {
        super();
        this.process = runtime.processor(charge, async (input, ctx) => {
          try {
            const res = await postEffect<{ id: string }>(url, input, ctx.idempotencyKey, ctx.signal);
            return { chargeId: res.body.id };
          } finally {
            seen.push({ aborted: ctx.signal.aborted, reason: ctx.signal.reason });
          }
        });
      }
    }
    const app = await NestFactory.createApplicationContext(appModule('nest-cancel', ChargeProcessor), {
      logger: false,
    });
    const gate = ds.holdNext();
    try {
      const q = idem.queue(charge);
      const job = await q.add('charge', { order: 'N-3', amount: 1200 });
      await gate.reached;
      expect(app.get(ChargeProcessor).worker.cancelJob(job.id as string, 'operator stop')).toBe(true);
      expect((await settled(q, job.id as string, 30_000)).state).toBe('failed');
      expect(seen).toEqual([{ aborted: true, reason: expect.anything() }]);
    } finally {
      gate.release();
      await app.close();
    }
  });

  it('a `process(job)` that drops the token is refused on its first job: IDEMPOTENCY_CONFIG, option token, nothing run', async () => {
    const charge = chargeOperation<Charged>({ queue: 'nest-no-token' });
    const url = ds.url;
    const thrown: unknown[] = [];
    class ChargeProcessor extends WorkerHost {
      private readonly charge: IdempotentBullProcessor<Charged, never>;
      constructor(runtime: Idempotency) {
        super();
        this.charge = runtime.processor(charge, async (input, ctx) => {
          const res = await postEffect<{ id: string }>(url, input, ctx.idempotencyKey);
          return { chargeId: res.body.id };
        });
      }
      override async process(job: Job): Promise<unknown> {
        try {
          return await this.charge(job);
        } catch (err) {
          thrown.push(err);
          throw err;
        }
      }
    }
    const app = await NestFactory.createApplicationContext(appModule('nest-no-token', ChargeProcessor), {
      logger: false,
    });
    try {
      const q = idem.queue(charge);
      const ids = await fourDuplicates(q, 'N-2');
      await q.add('charge', { order: 'N-2', amount: 1200 }, { attempts: 3, backoff: 10 }).then((j) => {
        ids.push(j.id as string);
      });
      const done = await Promise.all(ids.map((id) => settled(q, id, 30_000)));
      expect(done.map((d) => d.state)).toEqual(ids.map(() => 'failed'));
      for (const d of done) {
        expect(d.failedReason).toMatch(/^IDEMPOTENCY_CONFIG: /);
        expect(d.failedReason).toContain('without the token');
        expect(d.failedReason).not.toContain('IDEMPOTENCY_IN_PROGRESS');
      }
      // Refused for good at once: the job with three attempts used one.
      expect(done[4]?.job.attemptsMade).toBe(1);
      expect(ds.commitsFor({ order: 'N-2' })).toBe(0);
      expect(await idem.inspect({ namespace: 'acme/payments.charge', resourceKey: 'order:N-2', version: 'v1' })).toBe(
        null,
      );
      const refusal = originalError(thrown[0]);
      expect(isIdempotencyError(refusal, 'IDEMPOTENCY_CONFIG')).toBe(true);
      expect(refusal).toMatchObject({ details: { option: 'token', operation: 'payments.charge', jobId: ids[0] } });
    } finally {
      await app.close();
    }
  });
});
