import { types } from 'node:util';
import {
  DelayedError,
  type Job,
  RATE_LIMIT_ERROR,
  type RedisClient,
  UnrecoverableError,
  WaitingChildrenError,
  WaitingError,
} from 'bullmq';

// What the library knows of BullMQ's internals, and the one place it knows it: the signals its
// worker reads from a thrown error, how a job waits as a delayed job, the queue's own Redis client
// and the lock a worker holds on a job. Everything else goes through BullMQ's public API.

/** The names BullMQ 6.7's worker recognises as "the job was moved, not failed" (besides the classes). */
export const WAIT_NAMES: ReadonlySet<string> = new Set(['DelayedError', 'WaitingError', 'WaitingChildrenError']);

/**
 * BullMQ's control-flow errors, recognised exactly as BullMQ 6.7 recognises them, so that what is
 * let through unchanged is what BullMQ consumes without storing it:
 * - rate limited: only the message `bullmq:rateLimitExceeded` (`Worker.handleFailed` compares the
 *   message; neither the class `RateLimitError` nor the name counts: `new RateLimitError('429')`
 *   and an SDK's error named `RateLimitError` fail the job, and their text is stored);
 * - delayed, waiting, waiting for children: the class, or that exact `name`;
 * - unrecoverable: the class, or the name `UnrecoverableError` (`Job.shouldRetryJob`); this one
 *   fails the job, so its text is sealed like any other.
 *
 * A name or message counts only as a plain value (not a getter, which could answer BullMQ
 * otherwise), and a Proxy is never a signal.
 */
export function bullmqSignal(err: unknown): 'unrecoverable' | 'wait' | null {
  try {
    if (typeof err !== 'object' || err === null || types.isProxy(err) || !(err instanceof Error)) return null;
    if (dataValue(err, 'message') === RATE_LIMIT_ERROR) return 'wait';
    if (err instanceof DelayedError || err instanceof WaitingError || err instanceof WaitingChildrenError)
      return 'wait';
    const name = dataValue(err, 'name');
    if (typeof name === 'string' && WAIT_NAMES.has(name)) return 'wait';
    if (err instanceof UnrecoverableError || name === 'UnrecoverableError') return 'unrecoverable';
    return null;
  } catch {
    return null; // a prototype chain that throws when walked is nobody's signal
  }
}

/** The value of a data property on `obj` or its prototypes; undefined for an accessor or a Proxy on the way. */
function dataValue(obj: object, prop: string): unknown {
  for (let o: object | null = obj, depth = 0; o !== null && depth < 32; o = Object.getPrototypeOf(o), depth++) {
    if (types.isProxy(o)) return undefined;
    const d = Object.getOwnPropertyDescriptor(o, prop);
    if (d) return 'value' in d ? d.value : undefined;
  }
  return undefined;
}

/**
 * Makes a job wait without using a BullMQ attempt: it is moved to the delayed set for `waitMs`
 * under the worker's lock `token`, then BullMQ's `DelayedError` is thrown, which tells the worker
 * that the job was moved, not failed; its next attempt runs from the start. `moved` runs between
 * the two (a read that may promote the job again, a log line); `code`, when given, is set on the
 * error (what the trail is told of the wait).
 */
export async function waitAsDelayedJob(
  job: Job,
  token: string,
  waitMs: number,
  options: { code?: string; moved?: () => unknown } = {},
): Promise<never> {
  await job.moveToDelayed(Date.now() + waitMs, token);
  await options.moved?.();
  const signal = new DelayedError();
  throw options.code === undefined ? signal : Object.assign(signal, { code: options.code });
}

/** What the library asks of a queue's Redis client: reads, one by one or pipelined. */
export type QueueRedis = Pick<RedisClient, 'get' | 'hget' | 'lrange' | 'zrange' | 'llen'> & {
  pipeline(): {
    hget(key: string, field: string): unknown;
    exists(key: string): unknown;
    exec(): Promise<[Error | null, unknown][] | null>;
  };
};

/** Where a queue (or the queue a job holds) keeps its Redis client: BullMQ 6 `backend.client`, BullMQ 5 `client`. */
type QueueView = { client?: Promise<QueueRedis>; backend?: { client?: Promise<QueueRedis> } };

/**
 * The queue's own Redis client (BullMQ 6: `backend.client`; 5: `client`); undefined on another
 * backend (BullMQ's PostgreSQL backend has none).
 */
export async function queueRedis(queue: object): Promise<QueueRedis | undefined> {
  const view = queue as QueueView;
  return (await (view.backend?.client ?? view.client)) ?? undefined;
}

/**
 * Whether the worker's lock on `job` is still `token` (BullMQ keeps it at `<job key>:lock`). True
 * when it cannot be seen (no token, a sandboxed job with no queue, a backend without Redis): the
 * ledger's lease still fences the attempt.
 */
export async function holdsJobLock(job: Job, token: string | undefined): Promise<boolean> {
  const queue = (job as unknown as { queue?: QueueView & { toKey?: (type: string) => string } }).queue;
  if (!queue || typeof queue.toKey !== 'function' || !token || !job.id) return true;
  const client = await queueRedis(queue);
  if (!client) return true;
  return (await client.get(`${queue.toKey(job.id)}:lock`)) === token;
}
