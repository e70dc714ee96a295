import type { Job } from 'bullmq';
import { waitAsDelayedJob } from '../shared/bullmq.js';
import type { Logger } from '../shared/logger.js';
import type { ConfirmationStore } from './confirmation-store.js';
import { CONFIRMATION_PENDING } from './events.js';
import type { Confirmation } from './types.js';

/**
 * The field of `job.data` that names the confirmation a parked job waits for. Never part of the
 * input: {@link withoutParkedMark} takes it out before the job is read.
 */
export const PARKED_FIELD = '__idempotencyParked';

/** What a parked job carries: the request it waits for, and how often it looks at it. */
export type ParkedMark = { id: string; recheckMs: number };

type Data = Record<string, unknown>;

const isObject = (data: unknown): data is Data => typeof data === 'object' && data !== null && !Array.isArray(data);

/** How long a parked job sleeps at most before it looks at its request again. */
export const DEFAULT_RECHECK_MS = 60_000;

/**
 * The least re-check interval a mark is read with. Job data is writable by anyone who can add a
 * job, so the interval the mark carries is checked where it is read, not only where it was
 * written: a negative or missing one woke a parked job about a hundred times a second.
 */
export const MIN_RECHECK_MS = 1000;

/**
 * The mark of a parked job, or undefined (none, or not one this version wrote). Its re-check
 * interval is clamped to at least {@link MIN_RECHECK_MS} (as `recheckEvery` is when the mark is
 * written); one that is not a finite number is read as `fallbackMs`.
 */
export function parkedMark(data: unknown, fallbackMs = DEFAULT_RECHECK_MS): ParkedMark | undefined {
  const m = isObject(data) ? data[PARKED_FIELD] : undefined;
  if (!isObject(m) || typeof m.id !== 'string' || typeof m.recheckMs !== 'number') return undefined;
  const recheckMs = Number.isFinite(m.recheckMs) ? Math.max(MIN_RECHECK_MS, m.recheckMs) : fallbackMs;
  return { id: m.id, recheckMs };
}

/** Job data as it was enqueued: the mark, if any, left out. */
export function withoutParkedMark(data: unknown): unknown {
  if (!isObject(data) || !(PARKED_FIELD in data)) return data;
  const { [PARKED_FIELD]: _mark, ...rest } = data;
  return rest;
}

/**
 * Parks the job that waits for `c`: delayed (no attempt used) until the re-check or just after the
 * timeout, both measured on the database clock; an answer promotes it earlier. With `mark`, the
 * job carries the request's id, so its next attempt looks at the request before claiming
 * ({@link recheckParked}). Throws BullMQ's `DelayedError`, its code what the trail is told.
 */
export async function parkJob(
  store: ConfirmationStore,
  job: Job,
  token: string,
  c: Confirmation,
  recheckMs: number,
  options: { mark: boolean; logger?: Logger | undefined },
): Promise<never> {
  const leftMs = Math.max(0, c.expiresAt.getTime() - c.readAt.getTime());
  const waitMs = Math.min(recheckMs, leftMs + 50) + Math.floor(Math.random() * 25);
  if (options.mark && parkedMark(job.data)?.id !== c.id && isObject(job.data)) {
    await job.updateData({ ...job.data, [PARKED_FIELD]: { id: c.id, recheckMs } satisfies ParkedMark });
  }
  // BullMQ knows the DelayedError by its class; its code is what the lease's release tells the trail.
  return waitAsDelayedJob(job, token, waitMs, {
    code: CONFIRMATION_PENDING,
    moved: async () => {
      // An answer given while the job was on its way to the delayed set found nothing to promote.
      const now = await store.get(c.id).catch(() => c);
      if (now.status !== 'pending') await job.promote().catch(() => {});
      options.logger?.debug({ confirmation: c.id, jobId: job.id, waitMs }, 'waiting for confirmation');
    },
  });
}

/**
 * The start of an attempt of a job that carries a {@link ParkedMark}: one read of its request. Still
 * pending and within its timeout (on the database clock): the job is parked again, with no claim
 * and nothing written to the ledger or the trail. Anything else (answered, timed out, overdue, gone,
 * another operation's, unreadable): the mark is removed and the attempt goes on to claim, as
 * without a mark; `ctx.confirm()` then returns the answer or applies the timeout.
 */
export async function recheckParked(
  store: ConfirmationStore,
  job: Job,
  token: string,
  operationKey: string,
  logger?: Logger,
): Promise<void> {
  const mark = parkedMark(job.data);
  if (!mark) return;
  const c = await store.get(mark.id).catch(() => undefined);
  if (c && c.status === 'pending' && !c.overdue && c.operationKey === operationKey) {
    await parkJob(store, job, token, c, mark.recheckMs, { mark: false, logger });
  }
  await job.updateData(withoutParkedMark(job.data));
}
