import type { Queue } from 'bullmq';
import type { Logger } from '../shared/logger.js';
import { AUDIT_JOB_NAME } from './batch-codec.js';

/** Failed jobs read per page. */
const PAGE = 100;

/**
 * Sends every audit batch in the audit queue's failed set back to the writer, with a fresh
 * budget of attempts. A batch ends there when the writer gave up on it: a version that did not
 * retry transient errors (an outage of Postgres longer than its five attempts), or an error that
 * is neither transient nor data Postgres refuses (a missing table, a permission) and that an
 * operator has since fixed. Safe to repeat: the writer ignores events already written, and a
 * batch that fails again is retried on the next run. Returns how many batches were re-driven.
 *
 * @example
 * const redriven = await redriveFailedAuditBatches(auditQueue, logger);
 */
export async function redriveFailedAuditBatches(queue: Queue, logger?: Logger): Promise<number> {
  const seen = new Set<string>();
  let redriven = 0;
  let offset = 0;
  for (;;) {
    const jobs = await queue.getFailed(offset, offset + PAGE - 1);
    if (jobs.length === 0) break;
    let stayed = 0;
    for (const job of jobs) {
      if (!job?.id || seen.has(job.id)) {
        stayed++;
        continue;
      }
      seen.add(job.id);
      if (job.name !== AUDIT_JOB_NAME) {
        stayed++;
        continue;
      }
      try {
        await job.retry('failed', { resetAttemptsMade: true, resetAttemptsStarted: true });
        redriven++;
      } catch (err) {
        // Retried or removed meanwhile (another process's re-drive): it is no longer ours to move.
        if (
          await queue.getJobState(job.id).then(
            (s) => s === 'failed',
            () => true,
          )
        )
          throw err;
      }
    }
    // Re-driven jobs leave the set, so the next page starts after the ones that stayed.
    offset += stayed;
  }
  if (redriven > 0) logger?.info({ redriven }, 'failed audit batches re-driven');
  return redriven;
}
