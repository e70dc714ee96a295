import type pg from 'pg';
import { untilAborted } from '../config/abort.js';
import { errorLabel } from '../errors/clean-name.js';
import type { HttpReply, HttpRoute } from './http-server.js';

/** How long `/readyz` waits for each of Postgres and Redis. */
export const DEFAULT_READY_TIMEOUT_MS = 2_000;

/** How long one `/readyz` check answers every probe: many probers cost one check a second. */
export const DEFAULT_READY_CACHE_MS = 1_000;

export type HealthOptions = {
  pool: pg.Pool;
  /** One read of the Redis of the queues (the audit queue's wait list). */
  pingRedis(): Promise<unknown>;
  /** The process's workers, by name: each must be running for `/healthz`. */
  workers: Record<string, { isRunning(): boolean }>;
  /** True once a shutdown began: both probes then answer 503. */
  stopping(): boolean;
  /**
   * The process's job schedules, by name, each true when it exists in Redis (read live). A missing
   * one makes `/readyz` answer 503 naming it, until the process re-creates it (see KeptSchedule).
   */
  schedules?(): Promise<Record<string, boolean>>;
  /** @defaultValue {@link DEFAULT_READY_TIMEOUT_MS} */
  readyTimeoutMs?: number;
  /**
   * For how long a check's answer is given to every `/readyz` probe (a check in flight is shared
   * too): the route is unauthenticated, so probes, however many, cost Postgres and Redis at most
   * one round trip each per this period. 0: every probe checks. @defaultValue {@link DEFAULT_READY_CACHE_MS}
   */
  readyCacheMs?: number;
};

type Check = 'ok' | string;

async function check(p: () => Promise<unknown>, timeoutMs: number): Promise<Check> {
  try {
    await Promise.race([p(), untilAborted(AbortSignal.timeout(timeoutMs))]);
    return 'ok';
  } catch (err) {
    // By code (ECONNREFUSED, 57P01, TimeoutError), never by message.
    return errorLabel(err);
  }
}

/**
 * `/healthz` (liveness: the process is not stopping and its workers run; touches no service) and
 * `/readyz` (readiness: Postgres answers `select 1` and Redis answers a read of the audit queue, each within
 * `readyTimeoutMs`, and every job schedule exists). Both answer 200 or 503 with a JSON body naming
 * what failed, by code (a missing schedule by name: `schedules: { missing: ['sweeper', 'relay'] }`),
 * never by message: both are unauthenticated and tell nothing but states and codes. A `/readyz`
 * answer is shared by the probes of the next `readyCacheMs` (one second).
 */
export function healthRoutes(options: HealthOptions): HttpRoute[] {
  const timeoutMs = options.readyTimeoutMs ?? DEFAULT_READY_TIMEOUT_MS;
  const cacheMs = options.readyCacheMs ?? DEFAULT_READY_CACHE_MS;
  let last: { at: number; reply: Promise<HttpReply> } | undefined;
  const ready = async (): Promise<HttpReply> => {
    let found: Record<string, boolean> = {};
    const [postgres, redis, scheduled] = await Promise.all([
      check(() => options.pool.query({ text: 'select 1', query_timeout: timeoutMs } as pg.QueryConfig), timeoutMs),
      check(options.pingRedis, timeoutMs),
      options.schedules
        ? check(async () => {
            found = await (options.schedules as () => Promise<Record<string, boolean>>)();
          }, timeoutMs)
        : 'ok',
    ]);
    const missing = Object.keys(found).filter((name) => !found[name]);
    const schedules = scheduled === 'ok' ? (missing.length > 0 ? { missing } : 'ok') : scheduled;
    const isReady = postgres === 'ok' && redis === 'ok' && schedules === 'ok';
    const body = {
      status: isReady ? 'ready' : 'not ready',
      postgres,
      redis,
      ...(options.schedules ? { schedules } : {}),
    };
    return { status: isReady ? 200 : 503, body };
  };
  return [
    {
      method: 'GET',
      path: '/healthz',
      handle: () => {
        const stopped = Object.entries(options.workers)
          .filter(([, w]) => !w.isRunning())
          .map(([name]) => name);
        if (options.stopping()) return { status: 503, body: { status: 'stopping' } };
        if (stopped.length > 0) return { status: 503, body: { status: 'unhealthy', stopped } };
        return { status: 200, body: { status: 'ok' } };
      },
    },
    {
      method: 'GET',
      path: '/readyz',
      handle: () => {
        if (options.stopping()) return { status: 503, body: { status: 'stopping' } };
        const now = performance.now();
        if (last === undefined || now - last.at >= cacheMs) last = { at: now, reply: ready() };
        return last.reply;
      },
    },
  ];
}
