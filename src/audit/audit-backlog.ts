import type { Queue } from 'bullmq';
import type pg from 'pg';
import { queueRedis } from '../shared/bullmq.js';
import { type OutboxStats, outboxStats } from './outbox.js';

/** Delayed and failed audit batches looked at for the oldest one (the waiting list is ordered). */
const SCANNED_BATCHES = 1_000;

export type AuditQueueCounts = Record<'waiting' | 'delayed' | 'active' | 'failed', number>;

/** The audit events not yet written to Postgres, where they wait, and how far behind that is. */
export type AuditBacklog = {
  /**
   * When the oldest event not yet written was made: the oldest batch still in the audit queue
   * (waiting, delayed, active or failed) or in the Postgres outbox; null when all is written.
   */
  oldestPendingAt: Date | null;
  /** The audit lag: how long ago `oldestPendingAt` was; 0 when all is written. */
  lagMs: number;
  /** The audit queue's batches by state; null when the queue was not read (no Redis). */
  queue: AuditQueueCounts | null;
  outbox: OutboxStats;
};

/**
 * The audit backlog: what the outbox holds and, given the audit queue, what waits there. The one
 * definition of the audit lag, for `/metrics` and `stats` alike. Without a queue only the outbox
 * counts (`queue: null`).
 */
export async function auditBacklog(pool: pg.Pool, schema: string, auditQueue?: Queue): Promise<AuditBacklog> {
  const [outbox, pending] = await Promise.all([
    outboxStats(pool, schema),
    auditQueue ? pendingBatches(auditQueue) : undefined,
  ]);
  const stamps = [outbox.oldestAt?.getTime(), pending?.oldestTimestamp].filter((t) => t !== undefined);
  const oldest = stamps.length > 0 ? Math.min(...stamps) : undefined;
  return {
    oldestPendingAt: oldest === undefined ? null : new Date(oldest),
    lagMs: oldest === undefined ? 0 : Math.max(0, Date.now() - oldest),
    queue: pending?.counts ?? null,
    outbox,
  };
}

/**
 * The audit queue's batches not yet written, by state, and the creation time of the oldest:
 * the waiting list's tail (the next to run), every active batch, and the first
 * {@link SCANNED_BATCHES} delayed and failed ones (a batch delayed by an outage is not
 * necessarily first in its set), read as one field per job.
 */
async function pendingBatches(
  queue: Queue,
): Promise<{ counts: AuditQueueCounts; oldestTimestamp: number | undefined }> {
  // Undefined on BullMQ's PostgreSQL backend, which has no Redis client.
  const client = await queueRedis(queue);
  if (!client) return pendingBatchesOfBackend(queue);
  const [counts, waitTail, active, delayed, failed] = await Promise.all([
    queue.getJobCounts('waiting', 'delayed', 'active', 'failed'),
    client.lrange(queue.toKey('wait'), -1, -1),
    client.lrange(queue.toKey('active'), 0, -1),
    client.zrange(queue.toKey('delayed'), 0, SCANNED_BATCHES - 1),
    client.zrange(queue.toKey('failed'), 0, SCANNED_BATCHES - 1),
  ]);
  const ids = [...waitTail, ...active, ...delayed, ...failed];
  let oldestTimestamp: number | undefined;
  if (ids.length > 0) {
    const stamps = await Promise.all(ids.map((id) => client.hget(queue.toKey(id), 'timestamp')));
    for (const t of stamps) {
      const n = Number(t);
      if (t !== null && Number.isFinite(n) && (oldestTimestamp === undefined || n < oldestTimestamp)) {
        oldestTimestamp = n;
      }
    }
  }
  return {
    counts: queueCounts(counts),
    oldestTimestamp,
  };
}

/** BullMQ's counts of the four states a batch not yet written can be in, 0 where it gave none. */
function queueCounts(counts: Record<string, number | undefined>): AuditQueueCounts {
  return {
    waiting: counts.waiting ?? 0,
    delayed: counts.delayed ?? 0,
    active: counts.active ?? 0,
    failed: counts.failed ?? 0,
  };
}

/**
 * {@link pendingBatches} on a backend without a Redis client (BullMQ's PostgreSQL backend): the
 * counts, and the oldest creation time among the first {@link SCANNED_BATCHES} jobs of each state.
 */
async function pendingBatchesOfBackend(
  queue: Queue,
): Promise<{ counts: AuditQueueCounts; oldestTimestamp: number | undefined }> {
  const states = ['waiting', 'delayed', 'active', 'failed'] as const;
  const [counts, ...lists] = await Promise.all([
    queue.getJobCounts(...states),
    ...states.map((state) => queue.getJobs([state], 0, SCANNED_BATCHES - 1, true)),
  ]);
  const stamps = lists
    .flat()
    .map((job) => job?.timestamp)
    .filter((t): t is number => Number.isFinite(t));
  return {
    counts: queueCounts(counts),
    oldestTimestamp: stamps.length > 0 ? Math.min(...stamps) : undefined,
  };
}
