import type { ConnectionOptions } from 'bullmq';
import type pg from 'pg';
import { untilAborted } from './abort.js';
import { ConfigError, describeUrl, reasonOf, ServiceUnavailableError } from './errors.js';
import { describeRedisTarget, parseRedisUrl, type RedisTarget } from './redis-url.js';

export { reasonOf, ServiceUnavailableError } from './errors.js';

/** Default timeout of the reachability checks. */
export const CONNECT_TIMEOUT_MS = 5_000;

export type PoolOptions = {
  max?: number;
  timeoutMs?: number;
  /** `application_name` unless the URL sets one. */
  applicationName?: string;
  onError?: (err: Error) => void;
  /** The setting the URL came from, named by a configuration error. @defaultValue `'DATABASE_URL'` */
  variable?: string;
};

/**
 * Postgres' answers that no retry will change: the database or the role does not exist, or the
 * credentials are refused (SQLSTATE 3D000, 28000, 28P01). The URL is wrong, not the network.
 */
const REFUSED_SESSION = new Set(['3D000', '28000', '28P01']);

/** Redis refusing the credentials of the URL: a configuration error, like Postgres' 28P01. */
const REFUSED_AUTH = /^(?:WRONGPASS|NOAUTH)\b/;

/**
 * Opens a pg pool and proves it works (`select 1`) within the timeout.
 * @throws {@link ConfigError} when Postgres answers that the database or role does not exist or
 * the password is wrong (the pool is ended)
 * @throws {@link ServiceUnavailableError} when it cannot be reached in time (the pool is ended)
 */
export async function connectPostgres(url: string, options: PoolOptions = {}): Promise<pg.Pool> {
  const timeoutMs = options.timeoutMs ?? CONNECT_TIMEOUT_MS;
  // Loaded on use: the CLI's help and usage errors stay fast.
  const { default: pgm } = await import('pg');
  const pool = new pgm.Pool({
    connectionString: url,
    max: options.max ?? 5,
    connectionTimeoutMillis: timeoutMs,
    ...(options.applicationName ? { application_name: options.applicationName } : {}),
  });
  // An idle client losing its connection emits on the pool; unhandled, that would end the process.
  pool.on('error', (err) => options.onError?.(err));
  try {
    // connectionTimeoutMillis bounds the connect, query_timeout a server that accepts and never answers.
    await pool.query({ text: 'select 1', query_timeout: timeoutMs } as pg.QueryConfig);
    return pool;
  } catch (err) {
    pool.end().catch(() => {});
    const code = (err as { code?: unknown }).code;
    if (typeof code === 'string' && REFUSED_SESSION.has(code)) {
      throw new ConfigError([
        {
          variable: options.variable ?? 'DATABASE_URL',
          message: `(${describeUrl(url)}) is refused by Postgres: ${reasonOf(err)}`,
        },
      ]);
    }
    throw new ServiceUnavailableError('Postgres', describeUrl(url), reasonOf(err));
  }
}

/**
 * Connects to Redis once, without retries, and PINGs it within the timeout. On a cluster
 * (`REDIS_URL` naming cluster nodes), the client must learn the slots and find the cluster's
 * state ok, then PINGs. A server that accepts the connection and never answers fails too: the
 * whole check is bounded by `timeoutMs` plus one second.
 * @throws {@link ConfigError} when Redis refuses the URL's credentials
 * @throws {@link ServiceUnavailableError}
 */
export async function checkRedis(url: string, timeoutMs = CONNECT_TIMEOUT_MS, variable = 'REDIS_URL'): Promise<void> {
  const target = parseRedisUrl(url);
  if (target.kind === 'postgres') {
    // BullMQ's PostgreSQL backend: the queues' database answers as any Postgres does.
    const pool = await connectPostgres(url, { max: 1, timeoutMs, variable });
    await pool.end();
    return;
  }
  const { Redis, Cluster } = await import('ioredis');
  const redis =
    target.kind !== 'cluster'
      ? new Redis(url, {
          lazyConnect: true,
          connectTimeout: timeoutMs,
          maxRetriesPerRequest: 0,
          enableOfflineQueue: false,
          retryStrategy: () => null,
        })
      : new Cluster(target.nodes, {
          lazyConnect: true,
          enableOfflineQueue: false,
          clusterRetryStrategy: () => null,
          slotsRefreshTimeout: timeoutMs,
          redisOptions: { ...nodeOptions(target), connectTimeout: timeoutMs, maxRetriesPerRequest: 0 },
        });
  let lastError: unknown;
  redis.on('error', (err) => {
    lastError = err;
  });
  const deadline = AbortSignal.timeout(timeoutMs + 1_000);
  try {
    await Promise.race([
      (async () => {
        await redis.connect();
        await redis.ping();
      })(),
      untilAborted(deadline),
    ]);
    await redis.quit().catch(() => redis.disconnect());
  } catch (err) {
    redis.disconnect();
    const cause = lastError ?? err;
    const reason = cause === deadline.reason ? `no answer within ${timeoutMs + 1_000} ms` : reasonOf(cause);
    if (REFUSED_AUTH.test(reason)) {
      throw new ConfigError([{ variable, message: `(${describeRedisTarget(target)}) is refused by Redis: ${reason}` }]);
    }
    throw new ServiceUnavailableError('Redis', describeRedisTarget(target), reason);
  }
}

/** Credentials and TLS of a cluster's nodes; BullMQ needs `maxRetriesPerRequest: null`. */
function nodeOptions(target: Extract<RedisTarget, { kind: 'cluster' }>) {
  return {
    ...(target.username !== undefined ? { username: target.username } : {}),
    ...(target.password !== undefined ? { password: target.password } : {}),
    ...(target.tls ? { tls: {} } : {}),
    maxRetriesPerRequest: null,
  };
}

/** BullMQ's connection for `REDIS_URL`, and how to close what it opened. */
export type RedisConnection = {
  /** Options for a single node (each queue and worker opens its own); one shared ioredis `Cluster` on a cluster. */
  connection: ConnectionOptions;
  readonly cluster: boolean;
  /** Closes the shared cluster client (after the queues and workers on it); nothing for a single node. */
  close(force?: boolean): Promise<void>;
};

/**
 * Opens BullMQ's connection for `REDIS_URL`: options with the URL for a single node (as
 * before), BullMQ's PostgreSQL backend for a `postgres://` URL (its tables in the schema
 * `prefix` names, see `queueSchemaOf`), or an ioredis `Cluster` on the seed nodes, which BullMQ takes as `connection` (its
 * workers duplicate it for their blocking commands). BullMQ does not close a client it was given:
 * call `close()` after the queues and workers.
 *
 * @example
 * const redis = await openRedis(config.redisUrl);
 * const queue = new Queue('audit', { connection: redis.connection, prefix: '{bull}' });
 * // … await queue.close(); await redis.close();
 */
export async function openRedis(url: string, prefix = 'bull'): Promise<RedisConnection> {
  const target = parseRedisUrl(url);
  if (target.kind === 'postgres') {
    // Loaded on use, as ioredis is: BullMQ's tables in the schema the prefix names.
    const { postgresQueueConnection } = await import('../shared/queue-backend.js');
    return { connection: postgresQueueConnection(url, prefix), cluster: false, close: async () => {} };
  }
  if (target.kind === 'single') {
    return { connection: { url, maxRetriesPerRequest: null }, cluster: false, close: async () => {} };
  }
  const { Cluster } = await import('ioredis');
  const client = new Cluster(target.nodes, { redisOptions: nodeOptions(target) });
  // Errors reach the queues and workers that use the client; unhandled here they would end the process.
  client.on('error', () => {});
  return {
    connection: client,
    cluster: true,
    close: async (force = false) => {
      if (client.status === 'end') return;
      if (force) client.disconnect();
      else await client.quit().catch(() => client.disconnect());
    },
  };
}
