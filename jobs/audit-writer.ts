import { type ConnectionOptions, Worker } from 'bullmq';
import type pg from 'pg';
import { AuditStore } from '../src/audit/audit-store.js';
import {
  AUDIT_JOB_NAME,
  type DecodedAuditBatch,
  decodeAuditBatch,
  UndecodableAuditBatchError,
} from '../src/audit/batch-codec.js';
import type { RedactionPolicy } from '../src/redaction/define-policy.js';
import type { Logger } from '../src/worker/types.js';

export const DEFAULT_AUDIT_QUEUE = 'bullmq-idempotency-audit';

export type AuditWriterOptions = {
  connection: ConnectionOptions;
  /** Postgres pool the events are written with. */
  pool: pg.Pool;
  /** @defaultValue `'public'` */
  schema?: string;
  /** @defaultValue `'bullmq-idempotency-audit'` */
  queueName?: string;
  prefix?: string;
  /** Batches written at once. @defaultValue 4 */
  concurrency?: number;
  /**
   * Scrubs the events the writer dead-letters (an invalid event may never have been through an
   * emitter). Pass the emitters' policy, so that the references in dead letters match theirs.
   * @defaultValue DEFAULT_REDACTION_POLICY
   */
  redactionPolicy?: RedactionPolicy;
  logger?: Logger;
};

/**
 * The audit writer: a BullMQ worker that writes each audit batch with one multi-row statement.
 * Safe under redelivery (deterministic event ids, ON CONFLICT DO NOTHING); an invalid event is
 * dead-lettered with its reason and never blocks the queue.
 *
 * @example
 * const writer = createAuditWriter({ connection, pool });   // runs until writer.close()
 */
export function createAuditWriter(options: AuditWriterOptions): Worker {
  const store = new AuditStore(options.pool, options.schema, options.redactionPolicy);
  const worker = new Worker(
    options.queueName ?? DEFAULT_AUDIT_QUEUE,
    async (job) => {
      if (job.name !== AUDIT_JOB_NAME) return { skipped: true };
      let batch: DecodedAuditBatch;
      try {
        batch = await decodeAuditBatch(job.data);
      } catch (err) {
        if (!(err instanceof UndecodableAuditBatchError)) throw err;
        // Never blocks the queue: the batch is dead-lettered (its size, not its bytes) and done.
        const reason = { code: 'AUDIT_BATCH_UNDECODABLE', cause: err.problem } as const;
        await store.deadLetterBatch(job.id, job.data, reason);
        options.logger?.error(reason, 'audit batch dead-lettered');
        return { inserted: 0, duplicates: 0, deadLettered: 1 };
      }
      const result = await store.writeBatch(batch.events, batch.json);
      if (result.deadLettered > 0) {
        options.logger?.warn({ jobId: job.id, deadLettered: result.deadLettered }, 'audit events dead-lettered');
      }
      return result;
    },
    {
      connection: options.connection,
      concurrency: options.concurrency ?? 4,
      ...(options.prefix ? { prefix: options.prefix } : {}),
    },
  );
  worker.on('error', (err) => options.logger?.error({ err: err.message }, 'audit writer error'));
  return worker;
}
