import type { ConnectionOptions } from 'bullmq';
import { Cluster } from 'ioredis';
import { hasHashTag, parseRedisUrl, RedisUrlError } from '../config/redis-url.js';
import { IdempotencyConfigError } from '../errors/errors.js';
import { postgresQueueConnection } from '../shared/queue-backend.js';

/** The queues' connection as the runtime holds it, and how to close what it opened itself. */
export type QueueConnection = {
  /** What every queue and worker of the runtime is given. */
  readonly connection: ConnectionOptions;
  readonly cluster: boolean;
  /** Ends the cluster client the runtime opened for a cluster URL; nothing otherwise. */
  close(): Promise<void>;
};

/**
 * Resolves the `redis` option: a URL becomes BullMQ's options (a single node: each queue and
 * worker opens its own connection) or one ioredis `Cluster` on the URL's seed nodes (shared,
 * closed by the runtime); `ConnectionOptions` are used as given. On a cluster the prefix must
 * hold a hash tag, checked here before anything connects.
 */
export function queueConnection(redis: string | ConnectionOptions | undefined, prefix: string): QueueConnection {
  if (redis === undefined || redis === null || redis === '') {
    throw new IdempotencyConfigError('createIdempotency needs `redis`: a Redis URL or BullMQ ConnectionOptions', {
      option: 'redis',
    });
  }
  if (typeof redis !== 'string') {
    assertClusterPrefix(isCluster(redis), prefix);
    return { connection: redis, cluster: isCluster(redis), close: async () => {} };
  }
  let target: ReturnType<typeof parseRedisUrl>;
  try {
    target = parseRedisUrl(redis);
  } catch (err) {
    if (!(err instanceof RedisUrlError)) throw err;
    throw new IdempotencyConfigError(`redis: ${err.message}`, { option: 'redis' });
  }
  if (target.kind === 'postgres') {
    return { connection: postgresQueueConnection(redis, prefix), cluster: false, close: async () => {} };
  }
  if (target.kind === 'single') return { connection: { url: redis }, cluster: false, close: async () => {} };
  assertClusterPrefix(true, prefix);
  const client = new Cluster(target.nodes, {
    // Opened on first use, so a runtime that never touches a queue never connects.
    lazyConnect: true,
    redisOptions: {
      ...(target.username !== undefined ? { username: target.username } : {}),
      ...(target.password !== undefined ? { password: target.password } : {}),
      ...(target.tls ? { tls: {} } : {}),
      maxRetriesPerRequest: null,
    },
  });
  // Errors reach the queues and workers that use the client; unhandled here they would end the process.
  client.on('error', () => {});
  return {
    connection: client,
    cluster: true,
    close: async () => {
      if (client.status === 'end' || client.status === 'wait') return client.disconnect();
      await client.quit().catch(() => client.disconnect());
    },
  };
}

/** An ioredis `Cluster` given as the connection (BullMQ recognises one by the same flag). */
function isCluster(connection: ConnectionOptions): boolean {
  return (connection as { isCluster?: unknown }).isCluster === true;
}

function assertClusterPrefix(cluster: boolean, prefix: string): void {
  if (cluster && !hasHashTag(prefix)) {
    throw new IdempotencyConfigError(
      `prefix ${JSON.stringify(prefix)} must hold a hash tag on Redis Cluster, e.g. '{${prefix}}': ` +
        "BullMQ's scripts touch several keys of a queue at once, which the cluster allows only within one slot",
      { option: 'prefix', prefix },
    );
  }
}
