/**
 * Canaries end to end: a corpus generated afresh on every run (the scanner corpus's formats plus
 * content and personal data that no scanner can recognise) goes into everything a deployment
 * stores or tells — declared sensitive job input, results, step results, thrown errors of every
 * shape, `ctx.audit()` fields and details, log calls of every pino shape, CLI arguments — and
 * then every Postgres table, every Redis key of the prefix (audit batches decoded), every log
 * line and every CLI output is searched for any of it: raw, lower-case, URL-, base64- and
 * hex-encoded. Nothing may be found. What must be kept is sealed; what is told is structured;
 * the scanners only guard the free text of log lines and operator reasons.
 */
import { randomBytes, randomInt } from 'node:crypto';
import { Writable } from 'node:stream';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { AuditEmitter } from '../../src/audit/emitter.js';
import { auditRedactor } from '../../src/audit/redact-event.js';
import { TerminalError } from '../../src/errors/processor-errors.js';
import type { PostgresLedger } from '../../src/ledger/postgres-ledger.js';
import { defineRedactionPolicy } from '../../src/redaction/define-policy.js';
import { pinoRedactionOptions } from '../../src/scanners/pino/pino.js';
import { unseal } from '../../src/sealing/sealed-result.js';
import { withIdempotency } from '../../src/worker/with-idempotency.js';
import { testOperation } from '../fixtures/operations.js';
import { scannerCorpus } from '../fixtures/scanner-corpus.js';
import { bull, settled } from '../helpers/bullmq.js';
import { unknownRecord } from '../helpers/cli-records.js';
import { TestContext, waitFor } from '../helpers/context.js';
import { TEST_KEYRING_SPEC, testKeyring } from '../helpers/keyring.js';
import { childEnv, runTs } from '../helpers/spawn.js';
import { dumpPostgres, dumpRedis, plaintextFound } from '../helpers/stores.js';

const t = new TestContext('canary_pipeline');
const b = bull(t);
let ledger: PostgresLedger;

beforeAll(async () => {
  await t.setup();
  ledger = t.ledger();
});
afterAll(async () => {
  await ledger.close();
  await t.teardown();
});

const pick = <T>(xs: readonly T[]): T => xs[randomInt(xs.length)] as T;
const word = () => pick(['amber', 'harbor', 'velvet', 'quiet', 'maple', 'orbit', 'saffron', 'tundra', 'cobalt']);

/**
 * Values no scanner can know: content and personal data in plain words. They are safe only
 * because they are sealed or structured, never because they are recognised.
 */
function unrecognisable(): { id: string; value: string; needle: string }[] {
  const n = randomBytes(3).toString('hex');
  const v = (id: string, value: string, needle = value) => ({ id, value, needle });
  return [
    v(
      'prompt',
      `You are the billing agent for tenant ${n}. Refund order ${n} without asking.`,
      `billing agent for tenant ${n}`,
    ),
    v('conversation', `user: my daughter ${n} is ill, please cancel\nassistant: I am sorry`, `daughter ${n} is ill`),
    v('upload', `%PDF-1.7 ${word()} contract ${n} signed by both parties`, `contract ${n} signed`),
    v('passphrase-bare', `${word()} ${word()} ${word()} ${word()} ${n}`),
    v('full-name', `Margarethe ${word()}-${n} Oyelaran`, `${n} Oyelaran`),
    v('postal-address', `${randomInt(1, 400)} ${word()} Lane, Flat ${n}, Leeds LS1 4AP`, `Flat ${n}, Leeds`),
    v('date-of-birth', `born 19${randomInt(40, 99)}-0${randomInt(1, 9)}-1${randomInt(0, 9)} (${n})`, `(${n})`),
    v('diagnosis', `diagnosed with ${word()} syndrome, case ${n}`, `syndrome, case ${n}`),
    v('pin', `PIN ${randomInt(1000, 9999)}${n}`),
    v('security-answer', `first pet: ${word()}${n}`),
  ];
}

describe('canaries through the whole pipeline', () => {
  it('a fresh corpus of 100+ formats: zero plaintext in Postgres, Redis, logs and CLI output', async () => {
    const corpus = scannerCorpus();
    const plain = unrecognisable();
    const formats = corpus.length + plain.length;
    expect(formats).toBeGreaterThanOrEqual(100);
    const texts = [...corpus.map((c) => c.text), ...plain.map((p) => p.value)];
    const needles = [...corpus.flatMap((c) => c.needles), ...plain.map((p) => p.needle)];
    const scannable = corpus.map((c) => c.text);

    const policy = defineRedactionPolicy({
      version: 'canary-pipeline-1',
      hmacKeys: testKeyring.refKeys(),
      details: { 'tool.charge': ['amount', 'currency'] },
    });
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk, _enc, cb) {
        lines.push(String(chunk));
        cb();
      },
    });
    const logger = pino({ level: 'debug', ...pinoRedactionOptions(policy) }, sink);
    const auditQueue = b.queue('audit');
    const emitter = new AuditEmitter({
      queue: auditQueue,
      pool: ledger.pool,
      schema: t.schema,
      redact: auditRedactor(policy),
      logger,
    });
    const writer = b.auditWriter('audit', ledger.pool, { logger, redactionPolicy: policy });

    const op = testOperation({
      name: 'payments.charge',
      input: z.object({ orderId: z.string(), kind: z.string(), secrets: z.array(z.string()) }),
      effect: (i) => ({ orderId: i.orderId, secrets: i.secrets }),
      resourceKey: (i) => `order:${i.orderId}`,
      result: z.object({ orderId: z.string(), echo: z.array(z.string()), upload: z.instanceof(Buffer) }),
      publicResult: ['orderId'],
      sensitiveInput: ['secrets'],
    });
    class ProviderError extends Error {
      constructor(
        message: string,
        readonly response: { body: string },
      ) {
        super(message);
        this.name = 'ProviderError';
      }
    }
    const chunk = (i: number, n: number) => texts.filter((_, j) => j % n === i);
    const throwers: Record<string, (s: string[]) => never> = {
      error: (s) => {
        throw new Error(`charge failed: ${s.join(' | ')}`);
      },
      subclass: (s) => {
        throw new ProviderError(`provider said ${s[0]}`, { body: s.join('\n') });
      },
      object: (s) => {
        throw { message: 'not an error', payload: s };
      },
      string: (s) => {
        throw s.join(' ; ');
      },
      cause: (s) => {
        throw new Error('outer', { cause: new Error(`inner ${s.join(' ')}`) });
      },
      aggregate: (s) => {
        throw new AggregateError(
          s.map((x) => new Error(x)),
          'many',
        );
      },
      terminal: (s) => {
        throw new TerminalError('CARD_DECLINED', `declined: ${s.join(', ')}`, { publicMessage: 'card declined' });
      },
      dirty: (s) => {
        throw Object.assign(new Error('dirty code and name'), { code: s[0], name: s[1] });
      },
    };
    const kinds = ['ok', ...Object.keys(throwers)];
    let returned: unknown;
    const processor = async (
      input: z.output<typeof op.definition.input>,
      ctx: Parameters<Parameters<typeof withIdempotency>[1]>[1],
    ) => {
      const looked = await ctx.step('lookup', async () => ({ found: input.secrets, at: new Date() }));
      // Tool decisions whose own fields and details carry the corpus.
      for (const [i, s] of input.secrets.entries()) {
        if (i % kinds.length !== kinds.indexOf(input.kind)) continue;
        ctx.audit({
          action: i % 3 === 0 ? s : 'tool.charge',
          actorId: s,
          resourceType: i % 2 === 0 ? s : 'payment',
          resourceId: s,
          decision: 'allow',
          reasonCode: s,
          details: { amount: 5, currency: 'EUR', note: s, [s]: 1 },
        });
      }
      // What an application logs: every pino call shape.
      const s = pick(scannable);
      logger.info({ input: { orderId: input.orderId, note: s } }, 'charging');
      logger.info('charging with %s and %o', s, { token: s });
      logger.child({ note: s }).warn('child binding');
      const child = logger.child({ req: 'r1' });
      child.setBindings({ later: s });
      child.info('after setBindings');
      logger.error(new Error(`failed: ${s}`));
      logger.error({ err: new Error(s) }, 'with err');
      logger.debug(`interpolated ${s}`);
      if (input.kind !== 'ok')
        (throwers[input.kind] as (x: string[]) => never)(chunk(kinds.indexOf(input.kind), kinds.length));
      returned = { orderId: input.orderId, echo: looked.found, upload: Buffer.from(input.secrets.join('\n')) };
      return returned as { orderId: string; echo: string[]; upload: Buffer };
    };
    const q = b.queue('charges');
    const w = b.worker(
      'charges',
      withIdempotency(op, processor, { ledger, keyring: testKeyring, audit: emitter, logger }),
    );
    const jobs = [];
    for (const kind of kinds) {
      jobs.push(
        await op.enqueue(
          q,
          { orderId: `o-${kind}`, kind, secrets: texts },
          { keyring: testKeyring, taskId: 'task-canary', jobOptions: { attempts: 2, backoff: 10 } },
        ),
      );
    }
    const finals = await Promise.all(jobs.map((j) => settled(q, j.jobId, 30_000)));
    expect(finals.map((f) => f.state)).toEqual(kinds.map((k) => (k === 'ok' ? 'completed' : 'failed')));
    // The result is exact for whoever holds the key.
    expect(unseal(finals[0]?.returnvalue, testKeyring)).toStrictEqual(returned);
    await emitter.flush();
    await waitFor(
      async () =>
        Number(
          (
            await t.query(
              `select count(*) from ${t.schema}.audit_events where action = 'tool.charge' or actor_type = 'agent'`,
            )
          ).rows[0]?.count,
        ) >= 10,
      'tool decisions in the audit table',
      20_000,
    );

    // The operator CLI: arguments with canaries, and the output of what operators read.
    const env = childEnv({
      DATABASE_URL: t.databaseUrl,
      REDIS_URL: t.redisUrl,
      BQI_SCHEMA: t.schema,
      BQI_PREFIX: t.prefix,
      BQI_KEYRING: TEST_KEYRING_SPEC,
    });
    const held = await unknownRecord(
      ledger,
      { namespace: 'acme/payments.charge', resourceKey: 'order:held', version: 'v1' },
      'payments.charge',
    );
    const cliOut: string[] = [];
    const cli = async (args: string[]) => {
      const r = await runTs('src/cli/main.ts', args, env);
      cliOut.push(r.stdout, r.stderr);
      return r;
    };
    // The CLI takes an actor of 1 to 200 printable characters: a PEM key or a signed header is
    // refused (exit 2), and the refusal does not quote it back (the output is scanned below).
    const actorFits = (s: string) =>
      s.trim().length > 0 &&
      s.trim().length <= 200 &&
      [...s].every((c) => c.charCodeAt(0) >= 0x20 && !(c.charCodeAt(0) >= 0x7f && c.charCodeAt(0) <= 0x9f));
    const refusedActors = scannable.filter((s) => !actorFits(s));
    expect(refusedActors.length).toBeGreaterThan(0);
    for (const actor of refusedActors) {
      const refused = await cli(['resolve', held, '--not-committed', '--actor', actor, '--reason', 'checked']);
      expect(refused.code, refused.stderr).toBe(2);
      expect(refused.stderr).toContain("option '--actor <id>' argument '<not echoed>' is invalid");
    }
    const resolved = await cli([
      'resolve',
      held,
      '--committed',
      '--result',
      JSON.stringify({ receipt: texts }),
      '--actor',
      pick(scannable.filter(actorFits)),
      '--reason',
      `found in the PSP: ${pick(scannable)}`,
    ]);
    expect(resolved.code).toBe(0);
    const okKey = jobs[0]?.idempotencyKey as string;
    for (const args of [
      ['inspect', okKey],
      ['inspect', okKey, '--json'],
      ['inspect', jobs[1]?.idempotencyKey as string],
      ['inspect', held, '--json'],
      ['timeline', 'task-canary'],
      ['timeline', 'task-canary', '--json'],
      ['stats', '--json'],
    ]) {
      expect((await cli(args)).code, args.join(' ')).toBe(0);
    }
    await w.close();
    await writer.close();
    await emitter.close();

    const pgText = await dumpPostgres(t);
    const redisText = await dumpRedis(t);
    const logText = lines.join('');
    const cliText = cliOut.join('\n');
    // The scans read real data: the public field, codes, the log lines, the CLI's tables.
    expect(pgText).toContain('o-ok');
    expect(pgText).toContain('tool.charge');
    expect(redisText).toContain('failedReason');
    expect(logText).toContain('after setBindings');
    expect(cliText).toContain('sealed');
    // And the detector finds the corpus where it is in clear (the scan is not blind).
    expect(plaintextFound(texts.join('\n'), needles).length).toBe(needles.length);

    if (process.env.CANARY_DEBUG) {
      for (const [where, text] of [
        ['pg', pgText],
        ['redis', redisText],
        ['log', logText],
        ['cli', cliText],
      ] as const) {
        for (const n of plaintextFound(text, needles)) {
          const e = corpus.find((c) => c.needles.includes(n))?.id ?? plain.find((p) => p.needle === n)?.id;
          const at = text.toLowerCase().indexOf(n.toLowerCase());
          console.log(
            'LEAK',
            where,
            e,
            JSON.stringify(n),
            at >= 0 ? JSON.stringify(text.slice(Math.max(0, at - 120), at + 60)) : '(encoded)',
          );
        }
      }
    }
    expect(plaintextFound(pgText, needles)).toEqual([]);
    expect(plaintextFound(redisText, needles)).toEqual([]);
    expect(plaintextFound(logText, needles)).toEqual([]);
    expect(plaintextFound(cliText, needles)).toEqual([]);
    await q.close();
    await auditQueue.close();
  }, 120_000);
});
