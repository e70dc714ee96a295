import { type Job, Queue, QueueEvents, Worker, type WorkerOptions } from 'bullmq';
import type pg from 'pg';
import { type AuditWriterOptions, createAuditWriter } from '../../src/jobs/audit-writer.js';
import type { TestContext } from './context.js';

/** Queues, workers and queue-event listeners under the file's prefix, tracked for the leak check. */
export function bull(t: TestContext) {
  const connection = () => ({ url: t.redisUrl, maxRetriesPerRequest: null });
  return {
    queue(name: string): Queue {
      const q = new Queue(name, { connection: connection(), prefix: t.prefix });
      let closed = false;
      t.track(
        `queue ${name}`,
        () => closed,
        async () => {
          closed = true;
          await q.close();
        },
      );
      const close = q.close.bind(q);
      q.close = async () => {
        closed = true;
        return close();
      };
      return q;
    },
    worker<T = unknown, R = unknown>(
      name: string,
      processor: (job: Job<T, R>, token?: string, signal?: AbortSignal) => Promise<R>,
      opts: Partial<WorkerOptions> = {},
    ): Worker<T, R> {
      const w = new Worker<T, R>(name, processor, { connection: connection(), prefix: t.prefix, ...opts });
      w.on('error', () => {}); // lock renewal failures in stall tests are expected
      t.track(
        `worker ${name}`,
        () => w.closing !== undefined && !w.isRunning(),
        () => w.close(true),
      );
      return w;
    },
    /** The audit writer on `queueName`, writing to the file's schema, tracked for the leak check. */
    auditWriter(queueName: string, pool: pg.Pool, extra: Partial<AuditWriterOptions> = {}): Worker {
      const w = createAuditWriter({
        connection: { url: t.redisUrl },
        pool,
        schema: t.schema,
        queueName,
        prefix: t.prefix,
        ...extra,
      });
      t.track(
        `audit writer ${queueName}`,
        () => !w.isRunning(),
        () => w.close(),
      );
      return w;
    },
    events(name: string): QueueEvents {
      const e = new QueueEvents(name, { connection: connection(), prefix: t.prefix });
      let closed = false;
      const close = e.close.bind(e);
      e.close = async () => {
        closed = true;
        return close();
      };
      t.track(
        `queue events ${name}`,
        () => closed,
        () => e.close(),
      );
      return e;
    },
  };
}

/** Waits until a job is completed or failed (polling with a deadline), returning its final state. */
export async function settled(queue: Queue, jobId: string, timeoutMs = 20_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const state = await queue.getJobState(jobId);
    if (state === 'completed' || state === 'failed') {
      // Read the job after its state is final, so return value and reason are the final ones.
      const job = (await queue.getJob(jobId)) as Job;
      return { state, job, returnvalue: job.returnvalue, failedReason: job.failedReason };
    }
    if (Date.now() > deadline) throw new Error(`job ${jobId} still ${state} after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 25));
  }
}
