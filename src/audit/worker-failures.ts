import type { Job, Worker } from 'bullmq';
import type { AuditEmitter } from './emitter.js';

/** BullMQ's own reasons for failing a job without calling the processor. */
const OUTSIDE_PROCESSOR = /stalled more than allowable limit|started more than allowable limit/;

/**
 * Audits failures that never reach the processor (the stall limit, maxStartedAttempts): the
 * wrapper cannot see them, so they come from the worker's `failed` event.
 * @returns a function that detaches the listener
 */
export function auditWorkerFailures(worker: Worker, emitter: AuditEmitter, operation = 'unknown'): () => void {
  const onFailed = (job: Job | undefined, err: Error) => {
    if (!job || !OUTSIDE_PROCESSOR.test(err.message)) return;
    emitter.emit({
      type: 'failed',
      operation: job.name || operation,
      decision: 'deny',
      reasonCode: /stalled/.test(err.message) ? 'BULLMQ_STALL_LIMIT' : 'BULLMQ_MAX_STARTED_ATTEMPTS',
      ...(job.id ? { jobId: job.id } : {}),
      queue: job.queueName,
      attemptsMade: job.attemptsMade ?? 0,
      attemptsStarted: job.attemptsStarted ?? 0,
      stalledCounter: job.stalledCounter ?? 0,
    });
  };
  worker.on('failed', onFailed);
  return () => worker.off('failed', onFailed);
}
