/**
 * A fresh corpus of 100+ secret and personal-data formats (test/fixtures/error-secrets.ts) thrown
 * through every error path of the wrapper — Error, TypeError, subclasses with response bodies, zod
 * errors on input, on the result and thrown by the processor, errors named like BullMQ's signals,
 * Proxies, frozen errors, dirty codes and names, numeric-keyed details, AggregateError, cause
 * chains, a step's error, strings, objects, null — then searched for, raw and encoded, in every
 * Postgres table (ledger rows, audit events), every Redis key of the prefix (job hashes, failed
 * reasons, stack traces, event streams, audit batches) and what `failed` listeners receive
 * (JSON.stringify, util.inspect, pino's err serializer). Nothing may be found.
 */
import { randomInt } from 'node:crypto';
import { inspect } from 'node:util';
import { RateLimitError, UnrecoverableError } from 'bullmq';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { AuditEmitter } from '../../src/audit/emitter.js';
import { auditRedactor } from '../../src/audit/redact-event.js';
import { RetryableError, TerminalError } from '../../src/errors/processor-errors.js';
import { defineRedactionPolicy } from '../../src/redaction/define-policy.js';
import { originalError } from '../../src/sealing/original-error.js';
import { sealInput } from '../../src/sealing/sealed-input.js';
import { withIdempotency } from '../../src/worker/with-idempotency.js';
import { errorSecrets } from '../fixtures/error-secrets.js';
import { testOperation } from '../fixtures/operations.js';
import { settled } from '../helpers/bullmq.js';
import { waitFor } from '../helpers/context.js';
import { testKeyring } from '../helpers/keyring.js';
import { capturePino, pinoErrLine } from '../helpers/pino-capture.js';
import { dumpPostgres, dumpRedis, plaintextFound } from '../helpers/stores.js';
import { wrapperFile } from '../helpers/wrapper-file.js';

const { t, b, ledger: fileLedger } = wrapperFile('error_corpus');

describe('a fresh corpus through every error path', () => {
  it('zero plaintext in Postgres, Redis and what failed listeners receive', async () => {
    const corpus = errorSecrets();
    expect(corpus.length).toBeGreaterThanOrEqual(100);
    const texts = corpus.map((c) => c.value);
    const needles = corpus.map((c) => c.needle);
    const all = texts.join(' | ');
    const digitKey = () => `${randomInt(1, 9)}${Array.from({ length: 15 }, () => randomInt(10)).join('')}`;
    const digitKeys = Array.from({ length: 5 }, digitKey);
    needles.push(...digitKeys);

    class ProviderError extends Error {
      constructor(
        message: string,
        readonly response: { status: number; body: string; headers: Record<string, string> },
      ) {
        super(message);
        this.name = 'ProviderError';
      }
    }
    const chain = (depth: number): Error =>
      depth === 0 ? new Error(`root ${all}`) : new Error(`level ${depth}`, { cause: chain(depth - 1) });
    const throwers: Record<string, () => unknown> = {
      error: () => {
        throw new Error(`charge failed: ${all}`);
      },
      typeError: () => {
        throw new TypeError(`cannot read ${all}`);
      },
      subclass: () => {
        throw new ProviderError(`provider said ${texts[0]}`, {
          status: 401,
          body: all,
          headers: { authorization: texts[1] as string },
        });
      },
      zodInProcessor: () => {
        z.strictObject({ ok: z.boolean() }).parse(Object.fromEntries(texts.map((s) => [s, s])));
      },
      rateLimitNamed: () => {
        const e = new Error(`429 ${all}`);
        e.name = 'RateLimitError';
        throw e;
      },
      rateLimitClass: () => {
        throw new RateLimitError(`429 ${all}`);
      },
      unrecoverableNamed: () => {
        const e = new Error(`gave up ${all}`);
        e.name = 'UnrecoverableError';
        throw e;
      },
      unrecoverableClass: () => {
        throw new UnrecoverableError(`gave up ${all}`);
      },
      proxy: () => {
        throw new Proxy(new Error(`proxied ${all}`), { set: () => true, defineProperty: () => true });
      },
      hostileProxy: () => {
        // Every trap throws, with the corpus in its message: asked what it is, it answers with a secret.
        const trap = () => {
          throw new Error(`trap ${all}`);
        };
        throw new Proxy(new Error(`hostile ${all}`), { get: trap, getPrototypeOf: trap, ownKeys: trap, has: trap });
      },
      frozen: () => {
        throw Object.freeze(Object.assign(new Error(`frozen ${all}`), { code: texts[2] }));
      },
      dirtyCodeAndName: () => {
        throw Object.assign(new Error('dirty'), { code: texts[3], name: texts[4] });
      },
      numericDetails: () => {
        throw Object.assign(new Error('with details'), {
          details: Object.fromEntries(digitKeys.map((k, i) => [k, texts[i]])),
          issues: texts.map((s) => ({ path: [s], message: s })),
        });
      },
      aggregate: () => {
        throw new AggregateError(
          texts.map((s) => new Error(s)),
          'many',
        );
      },
      causeChain: () => {
        throw chain(4);
      },
      terminal: () => {
        throw new TerminalError('DECLINED', `declined ${all}`, { publicMessage: 'declined', cause: new Error(all) });
      },
      retryable: () => {
        throw new RetryableError(`busy ${all}`, { cause: { body: all } });
      },
      string: () => {
        throw `a string ${all}`;
      },
      object: () => {
        throw { message: 'plain object', secrets: texts, [digitKeys[0] as string]: texts[5] };
      },
      null: () => {
        throw null;
      },
      step: () => 'step', // thrown inside ctx.step below
      result: () => 'result', // a result that fails its schema below
    };

    const policy = defineRedactionPolicy({ version: 'error-corpus-1', hmacKeys: testKeyring.refKeys() });
    const auditQueue = b.queue('audit');
    const emitter = new AuditEmitter({
      queue: auditQueue,
      pool: fileLedger().pool,
      schema: t.schema,
      redact: auditRedactor(policy),
    });
    const writer = b.auditWriter('audit', fileLedger().pool, { redactionPolicy: policy });
    // The developer's log: scanned text only, a second line of defence (measured, not promised).
    const { logger, lines } = capturePino({ level: 'warn' });
    const operation = testOperation({
      name: 'corpus.run',
      input: z.object({ kind: z.string(), blob: z.record(z.string(), z.literal(0)).optional() }),
      effect: (i) => ({ kind: i.kind }),
      resourceKey: (i) => `kind:${i.kind}`,
      result: z.strictObject({ ok: z.literal(true) }),
      sensitiveInput: ['blob'],
    });
    const q = b.queue('corpus');
    const w = b.worker(
      'corpus',
      withIdempotency(
        operation,
        async (input, ctx) => {
          if (input.kind === 'step') {
            await ctx.step('lookup', async () => {
              throw new Error(`step failed ${all}`);
            });
          }
          if (input.kind === 'result') return { ok: false, ...Object.fromEntries(texts.map((s) => [s, s])) } as never;
          (throwers[input.kind] as () => never)();
          return { ok: true as const };
        },
        { ledger: fileLedger(), keyring: testKeyring, audit: emitter, logger, logErrorText: true },
      ),
    );
    const failed: unknown[] = [];
    w.on('failed', (_job, err) => failed.push(err));

    const jobIds: string[] = [];
    for (const kind of Object.keys(throwers)) {
      jobIds.push((await operation.enqueue(q, { kind }, { keyring: testKeyring, taskId: 'task-corpus' })).jobId);
    }
    // Input its schema refuses: secret and digit keys inside sealed input, added without the helper.
    const blob = Object.fromEntries([...texts, ...digitKeys].map((k) => [k, 1]));
    jobIds.push((await q.add('raw', sealInput(operation, { kind: 'input', blob }, testKeyring, 'raw'))).id as string);

    const finals = await Promise.all(jobIds.map((id) => settled(q, id, 30_000)));
    expect(finals.map((f) => f.state)).toEqual(jobIds.map(() => 'failed'));
    expect(failed).toHaveLength(jobIds.length);
    const warned = lines()
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { level: number; attempt?: number; code?: string });
    expect(warned.filter((l) => l.level === 40 && l.attempt === 1 && typeof l.code === 'string')).toHaveLength(
      jobIds.length,
    ); // one warn line per failed attempt
    await emitter.flush();
    await waitFor(
      async () => Number((await t.query(`select count(*) from ${t.schema}.audit_events`)).rows[0]?.count) > 0,
      'audit events written',
      20_000,
    );
    await w.close();
    await writer.close();
    await emitter.close();

    const pgText = await dumpPostgres(t);
    const redisText = await dumpRedis(t);
    // The scans read real data: records, reasons, stacks, events.
    expect(pgText).toContain('corpus.run');
    expect(redisText).toContain('failedReason');
    expect(redisText).toContain('stacktrace');
    const told = failed
      .map((err) => `${JSON.stringify(err)}\n${inspect(err, { depth: 10, showHidden: true })}\n${pinoErrLine(err)}`)
      .join('\n');
    // And the detector finds the corpus where it is in clear (the scan is not blind).
    expect(plaintextFound(`${all} ${digitKeys.join(' ')}`, needles)).toHaveLength(needles.length);

    if (process.env.CORPUS_DEBUG) {
      const count = (text: string) => plaintextFound(text, needles).length;
      console.log('FOUND', {
        pg: count(pgText),
        redis: count(redisText),
        told: count(told),
        log: count(lines()),
        of: needles.length,
      });
      console.log(
        'LOG-MISSES',
        plaintextFound(lines(), needles)
          .map((n) => corpus.find((c) => c.needle === n)?.id ?? 'digit-key')
          .join(' '),
      );
      for (const [where, text] of [
        ['pg', pgText],
        ['redis', redisText],
        ['told', told],
      ] as const) {
        for (const n of plaintextFound(text, needles)) {
          const at = text.toLowerCase().indexOf(n.toLowerCase());
          console.log(
            'LEAK',
            where,
            corpus.find((c) => c.needle === n)?.id,
            JSON.stringify(text.slice(Math.max(0, at - 300), at + 80)),
          );
        }
      }
    }
    expect(plaintextFound(pgText, needles)).toEqual([]);
    expect(plaintextFound(redisText, needles)).toEqual([]);
    expect(plaintextFound(told, needles)).toEqual([]);
    expect(told).toContain('open it with BQI_KEYRING set');
    // The originals are still in this process for the developer.
    const originals = failed.map(originalError);
    expect(originals.filter((o) => o === undefined)).toEqual([]);
    expect(originals.filter((o) => o === null)).toHaveLength(1);
    await q.close();
    await auditQueue.close();
  }, 120_000);
});
