import type { TestContext } from './context.js';

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
