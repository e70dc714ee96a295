import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createIdempotency } from '../../src/runtime/create-idempotency.js';
import type { IdempotencyOptions } from '../../src/runtime/options.js';
import { TestContext, waitFor } from '../helpers/context.js';
import { TEST_KEYRING_SPEC } from '../helpers/keyring.js';

/**
 * `close()` closes what the runtime opened and nothing it was given: a pool it opened from a
 * connection string is ended (its backends leave pg_stat_activity), a pool of the application's
 * stays open and usable, and so does a Redis client of the application's.
 */
const t = new TestContext('runtime_close');

beforeAll(() => t.setup());
afterAll(() => t.teardown());

const options = (postgres: string | pg.Pool): IdempotencyOptions => ({
  postgres,
  schema: t.schema,
  redis: t.redisUrl,
  prefix: t.prefix,
  keyring: TEST_KEYRING_SPEC,
  logger: false,
});

/** Backends connected under `name`. */
async function backends(name: string): Promise<number> {
  const r = await t.query<{ n: string }>('select count(*) as n from pg_stat_activity where application_name = $1', [
    name,
  ]);
  return Number(r.rows[0]?.n);
}

/** The connection string of this file, under its own `application_name`. */
function tagged(name: string): string {
  const u = new URL(t.databaseUrl);
  u.searchParams.set('application_name', name);
  return u.toString();
}

describe('Idempotency.close()', () => {
  it('ends the pool it opened', async () => {
    const name = `${t.tag}_own_${randomBytes(2).toString('hex')}`;
    const idem = createIdempotency(options(tagged(name)));
    await Promise.all([idem.inspect('acme%2Fx:a:v1'), idem.inspect('acme%2Fx:b:v1'), idem.confirmations.list()]);
    expect(await backends(name)).toBeGreaterThan(0);

    await idem.close();

    await waitFor(async () => (await backends(name)) === 0, `no backend of ${name}`, 5_000);
    expect(await backends(name)).toBe(0);
  });

  it('leaves a pool it was given open and usable, and a Redis client it was given', async () => {
    const name = `${t.tag}_given_${randomBytes(2).toString('hex')}`;
    const pool = new pg.Pool({ connectionString: tagged(name), max: 3 });
    const redis = t.redis();
    try {
      const idem = createIdempotency({ ...options(pool), redis });
      await idem.migrate();
      await Promise.all([idem.inspect('acme%2Fx:a:v1'), idem.queue('payments').getJobCounts()]);
      const before = await backends(name);
      expect(before).toBeGreaterThan(0);

      await idem.close();

      expect(pool.ended).toBe(false);
      expect((await pool.query('select 1 as one')).rows).toEqual([{ one: 1 }]);
      expect(await backends(name)).toBeGreaterThan(0);
      expect(await redis.ping()).toBe('PONG');
    } finally {
      await Promise.all([pool.end(), redis.quit()]);
      await waitFor(() => redis.status === 'end', 'the Redis client to end', 5_000);
    }
  });

  it('is idempotent, and a closed runtime refuses new work', async () => {
    const idem = createIdempotency(options(t.databaseUrl));
    await Promise.all([idem.close(), idem.close()]);
    await expect(idem.enqueue({ name: 'x', definition: {} } as never, {})).rejects.toThrow(/closed/);
    expect(() => idem.queue('payments')).toThrow(/closed/);
    expect(() => idem.worker({ name: 'x', definition: {} } as never, async () => 1)).toThrow(/closed/);
  });
});
