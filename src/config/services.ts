import type pg from 'pg';
import { describeUrl, reasonOf, ServiceUnavailableError } from './errors.js';

export { reasonOf, ServiceUnavailableError } from './errors.js';

/** Default timeout of the reachability checks. */
export const CONNECT_TIMEOUT_MS = 5_000;

async function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      p,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`${what} timed out after ${ms} ms`)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

export type PoolOptions = {
  max?: number;
  timeoutMs?: number;
  /** `application_name` unless the URL sets one. */
  applicationName?: string;
  onError?: (err: Error) => void;
};

/**
 * Opens a pg pool and proves it works (`select 1`) within the timeout.
 * @throws {@link ServiceUnavailableError} (the pool is ended)
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
    await withTimeout(pool.query('select 1'), timeoutMs + 1_000, 'connecting');
    return pool;
  } catch (err) {
    pool.end().catch(() => {});
    throw new ServiceUnavailableError('Postgres', describeUrl(url), reasonOf(err));
  }
}

/**
 * Connects to Redis once, without retries, and PINGs it within the timeout.
 * @throws {@link ServiceUnavailableError}
 */
export async function checkRedis(url: string, timeoutMs = CONNECT_TIMEOUT_MS): Promise<void> {
  const { Redis } = await import('ioredis');
  const redis = new Redis(url, {
    lazyConnect: true,
    connectTimeout: timeoutMs,
    maxRetriesPerRequest: 0,
    enableOfflineQueue: false,
    retryStrategy: () => null,
  });
  let lastError: unknown;
  redis.on('error', (err) => {
    lastError = err;
  });
  try {
    await withTimeout(
      (async () => {
        await redis.connect();
        await redis.ping();
      })(),
      timeoutMs + 1_000,
      'connecting',
    );
    await redis.quit().catch(() => redis.disconnect());
  } catch (err) {
    redis.disconnect();
    throw new ServiceUnavailableError('Redis', describeUrl(url), reasonOf(lastError ?? err));
  }
}
