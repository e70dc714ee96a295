import { createIdempotency, type Idempotency } from '../../src/runtime/create-idempotency.js';
import type { IdempotencyOptions } from '../../src/runtime/options.js';
import type { TestContext } from './context.js';
import { TEST_KEYRING_SPEC } from './keyring.js';

/** A runtime in the file's schema and prefix, quiet (no audit, no logs), with `extra` options. */
export function quietRuntime(t: TestContext, extra: Partial<IdempotencyOptions> = {}): Idempotency {
  return createIdempotency({
    postgres: t.databaseUrl,
    schema: t.schema,
    redis: t.redisUrl,
    prefix: t.prefix,
    keyring: TEST_KEYRING_SPEC,
    audit: false,
    logger: false,
    ...extra,
  });
}

/**
 * What a Redis that lost its data leaves of the file's queues: every key under the file's own
 * prefix deleted (never the shared Redis as a whole). Returns how many keys went.
 */
export async function wipePrefix(t: TestContext): Promise<number> {
  const redis = t.redis();
  let cursor = '0';
  let n = 0;
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${t.prefix}*`, 'COUNT', 1000);
    cursor = next;
    if (keys.length) n += await redis.del(...keys);
  } while (cursor !== '0');
  await redis.quit();
  return n;
}
