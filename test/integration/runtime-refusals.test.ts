import { randomBytes } from 'node:crypto';
import { Cluster } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { IdempotencyConfigError } from '../../src/errors/errors.js';
import { ERROR_CODES } from '../../src/errors/idempotency-error.js';
import { defineRedactionPolicy } from '../../src/redaction/define-policy.js';
import { createIdempotency } from '../../src/runtime/create-idempotency.js';
import type { IdempotencyOptions } from '../../src/runtime/options.js';
import { defineKeyring } from '../../src/sealing/keyring.js';
import { chargeOperation } from '../fixtures/operations.js';
import { TestContext } from '../helpers/context.js';
import { TEST_KEYRING_SPEC, testKeyring } from '../helpers/keyring.js';

/**
 * Parts that cannot work together are refused when the runtime is built (or a worker of it),
 * before anything connects: `IDEMPOTENCY_CONFIG` with the option named. Each of these, accepted,
 * fails later and elsewhere: a raw `relation … does not exist`, an empty timeline, jobs no worker
 * sees, a CROSSSLOT error from Redis Cluster.
 */
const t = new TestContext('runtime_refusals');

afterAll(() => t.teardown());

const valid = (): IdempotencyOptions => ({
  postgres: t.databaseUrl,
  schema: t.schema,
  redis: t.redisUrl,
  prefix: t.prefix,
  keyring: TEST_KEYRING_SPEC,
  logger: false,
});

/** The refusal of `build`, as its code and option. */
function refusal(build: () => unknown): { code: string; option: unknown } {
  try {
    build();
  } catch (err) {
    expect(err).toBeInstanceOf(IdempotencyConfigError);
    const e = err as IdempotencyConfigError;
    return { code: e.code, option: e.details.option };
  }
  throw new Error('not refused');
}

const config = (option: string) => ({ code: ERROR_CODES.config, option });

describe('createIdempotency refuses what cannot work together', () => {
  it('a schema name that is not a plain identifier', () => {
    expect(refusal(() => createIdempotency({ ...valid(), schema: 'Payments-Prod' }))).toEqual(config('schema'));
    expect(refusal(() => createIdempotency({ ...valid(), schema: 'app; drop table x' }))).toEqual(config('schema'));
  });

  it('a missing, malformed or weak keyring', () => {
    const { keyring: _, ...noKeyring } = valid();
    expect(refusal(() => createIdempotency(noKeyring as IdempotencyOptions))).toEqual(config('keyring'));
    expect(refusal(() => createIdempotency({ ...valid(), keyring: '' }))).toEqual(config('keyring'));
    expect(refusal(() => createIdempotency({ ...valid(), keyring: 'no-colon-here' }))).toEqual(config('keyring'));
    expect(refusal(() => createIdempotency({ ...valid(), keyring: 'k1:short' })).code).toBe(ERROR_CODES.config);
  });

  it('an audit policy keyed from other keys than the keyring', () => {
    const other = defineKeyring({ keys: [{ id: 't1', secret: `base64:${randomBytes(32).toString('base64')}` }] });
    const elsewhere = defineRedactionPolicy({ version: 'v1', hmacKeys: other.refKeys() });
    expect(refusal(() => createIdempotency({ ...valid(), audit: { redaction: elsewhere } }))).toEqual(
      config('audit.redaction'),
    );
    const raw = { version: 'v1', hmacKeys: [{ id: 't1', secret: 'x'.repeat(40) }] } as never;
    expect(refusal(() => createIdempotency({ ...valid(), audit: { redaction: raw } }))).toEqual(
      config('audit.redaction'),
    );
  });

  it('accepts a policy keyed from the keyring, and rules without keys (keyed for it)', async () => {
    const keyed = defineRedactionPolicy({ version: 'v1', hmacKeys: testKeyring.refKeys(), details: { x: ['a'] } });
    const one = createIdempotency({ ...valid(), audit: { redaction: keyed } });
    const two = createIdempotency({ ...valid(), audit: { redaction: { version: 'v2', details: { x: ['a'] } } } });
    expect(one.auditPolicy).toBe(keyed);
    expect(two.auditPolicy.keyIds).toEqual(['t1']);
    expect(two.auditPolicy.details).toEqual({ x: ['a'] });
    await Promise.all([one.close(), two.close()]);
  });

  it('a Redis Cluster with a prefix that has no hash tag', async () => {
    expect(
      refusal(() =>
        createIdempotency({ ...valid(), redis: 'redis+cluster://127.0.0.1:7000,127.0.0.1:7001', prefix: 'app' }),
      ),
    ).toEqual(config('prefix'));
    expect(
      refusal(() => createIdempotency({ ...valid(), redis: 'redis+cluster://127.0.0.1:7000', prefix: 'bull' })),
    ).toEqual(config('prefix'));
    const cluster = new Cluster([{ host: '127.0.0.1', port: 7000 }], { lazyConnect: true });
    try {
      // The URL's own hash-tagged prefix is accepted.
      await expect(
        createIdempotency({ ...valid(), redis: 'redis+cluster://127.0.0.1:7000' }).close(),
      ).resolves.toBeUndefined();
      expect(refusal(() => createIdempotency({ ...valid(), redis: cluster, prefix: 'app' }))).toEqual(config('prefix'));
      const { prefix: _, ...defaultPrefix } = valid();
      expect(refusal(() => createIdempotency({ ...defaultPrefix, redis: cluster }))).toEqual(config('prefix'));
    } finally {
      cluster.disconnect();
    }
  });

  it('a Redis URL of no accepted form, and no Postgres', () => {
    expect(refusal(() => createIdempotency({ ...valid(), redis: 'http://127.0.0.1:6379' }))).toEqual(config('redis'));
    expect(refusal(() => createIdempotency({ ...valid(), redis: '' }))).toEqual(config('redis'));
    expect(refusal(() => createIdempotency({ ...valid(), postgres: '' }))).toEqual(config('postgres'));
  });

  it("a worker's prefix or connection other than the runtime's, and a queue name BullMQ would split", async () => {
    const idem = createIdempotency(valid());
    try {
      const charge = chargeOperation();
      const run = async () => ({ ok: true });
      expect(refusal(() => idem.worker(charge, run, { prefix: 'bull' }))).toEqual(config('workerOptions.prefix'));
      expect(refusal(() => idem.worker(charge, run, { connection: { url: t.redisUrl } }))).toEqual(
        config('workerOptions.connection'),
      );
      expect(refusal(() => idem.worker(chargeOperation({ queue: 'pay:ments' }), run))).toEqual(config('queue'));
      // The runtime's own values are accepted.
      const worker = idem.worker(charge, run, { prefix: t.prefix, connection: idem.connection, autorun: false });
      expect([worker.name, worker.opts.prefix]).toEqual(['payments.charge', t.prefix]);
    } finally {
      await idem.close();
    }
  });
});
