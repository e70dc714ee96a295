import { type ConnectionOptions, type Job, type Processor, Worker, type WorkerOptions } from 'bullmq';
import type pg from 'pg';
import { AuditStore, DEFAULT_CHAIN_SLOTS } from '../audit/audit-store.js';
import {
  AUDIT_JOB_NAME,
  type DecodedAuditBatch,
  decodeAuditBatch,
  UndecodableAuditBatchError,
} from '../audit/batch-codec.js';
import { isTransientError } from '../audit/transient-error.js';
import { exportChainHeads } from '../audit/verify-chain.js';
import { errorLabel } from '../errors/clean-name.js';
import { ERROR_CODES } from '../errors/idempotency-error.js';
import type { RedactionPolicy } from '../redaction/define-policy.js';
import { waitAsDelayedJob } from '../shared/bullmq.js';
import type { Logger } from '../shared/logger.js';
import { queueBackendOf } from '../shared/queue-backend.js';
import { backoffDelay } from '../shared/timing.js';

export const DEFAULT_AUDIT_QUEUE = 'bullmq-idempotency-audit';

/** Delay before the first retry of a batch that met a transient error. */
export const DEFAULT_TRANSIENT_INITIAL_MS = 1_000;
/** Longest delay between retries of a batch that meets transient errors. */
export const DEFAULT_TRANSIENT_MAX_MS = 30_000;

/** Backoff of batches that meet transient errors: doubling from `initialMs`, capped at `maxMs`. */
export type TransientBackoffOptions = {
  /** @defaultValue 1000 */
  initialMs?: number;
  /** @defaultValue 30000 */
  maxMs?: number;
};

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
  /**
   * Retries of a batch that meets a transient error (Postgres unreachable, connection terminated,
   * too many connections…, see `isTransientError`): without limit, at these delays.
   */
  transientBackoff?: TransientBackoffOptions;
  /** Run the batch insert as a named prepared statement (see `AuditStoreOptions`). @defaultValue true */
  preparedStatements?: boolean;
  /**
   * Hash chains per day (see `AuditStoreOptions.chainSlots`).
   * @defaultValue the writer's concurrency, at least 4
   */
  chainSlots?: number;
  /**
   * Logs the head of every audit chain (`exportChainHeads`) at this interval, in ms, at level
   * info (`audit chain heads`), so that log storage anchors the trail elsewhere. Off when unset.
   */
  chainHeadsLogMs?: number;
  logger?: Logger;
};

/**
 * The audit writer: a BullMQ worker that writes each audit batch with one multi-row statement.
 * Safe under redelivery (deterministic event ids, one stored row per id); an invalid event is
 * dead-lettered with its reason and never blocks the queue.
 *
 * A batch that meets a transient error is moved to BullMQ's delayed set (`moveToDelayed` +
 * `DelayedError`, which uses none of the job's attempts) and retried with a capped exponential
 * backoff for as long as the error lasts: the batch stays in Redis all along, whatever attempts
 * the job was enqueued with (older jobs carry 5). Parking it in the Postgres outbox instead
 * would need the database that is down. Other errors use the job's attempts, then the failed
 * set, which `redriveFailedAuditBatches` empties.
 *
 * @example
 * const writer = createAuditWriter({ connection, pool });   // runs until writer.close()
 */
export function createAuditWriter(options: AuditWriterOptions): Worker {
  const store = new AuditStore(options.pool, options.schema, options.redactionPolicy, {
    chainSlots: options.chainSlots ?? Math.max(DEFAULT_CHAIN_SLOTS, options.concurrency ?? 4),
    ...(options.preparedStatements === undefined ? {} : { preparedStatements: options.preparedStatements }),
    ...(options.logger ? { logger: options.logger } : {}),
  });
  const worker = new AuditWriterWorker(
    store,
    options.queueName ?? DEFAULT_AUDIT_QUEUE,
    async (job, token) => {
      if (job.name !== AUDIT_JOB_NAME) return { skipped: true };
      try {
        return await writeJob(job);
      } catch (err) {
        if (!token || !isTransientError(err)) throw err;
        const retry = transientRetries(job);
        const delayMs = transientDelay(retry, options.transientBackoff);
        return waitAsDelayedJob(job, token, delayMs, {
          moved: () =>
            options.logger?.warn(
              { jobId: job.id, retry: retry + 1, delayMs, err: errorLabel(err) },
              'audit batch delayed: transient error',
            ),
        });
      }
    },
    {
      connection: options.connection,
      concurrency: options.concurrency ?? 4,
      ...(options.prefix ? { prefix: options.prefix } : {}),
    },
  );
  async function writeJob(job: Job) {
    let batch: DecodedAuditBatch;
    try {
      batch = await decodeAuditBatch(job.data);
    } catch (err) {
      if (!(err instanceof UndecodableAuditBatchError)) throw err;
      // Never blocks the queue: the batch is dead-lettered (its size, not its bytes) and done.
      const reason = { code: ERROR_CODES.auditBatchUndecodable, cause: err.problem } as const;
      await store.deadLetterBatch(job.id, job.data, reason);
      options.logger?.error(reason, 'audit batch dead-lettered');
      return { inserted: 0, duplicates: 0, deadLettered: 1 };
    }
    // A batch an emitter of this policy tagged is checked, not redacted again (batch-tag.ts).
    const tagHeld = store.trustsBatch(job.data, batch.events.length);
    const result = { ...(await store.writeBatch(batch.events, batch.json, tagHeld)), tagHeld };
    if (result.deadLettered > 0) {
      options.logger?.warn({ jobId: job.id, deadLettered: result.deadLettered }, 'audit events dead-lettered');
    }
    return result;
  }
  worker.on('error', (err) => options.logger?.error({ err: errorLabel(err) }, 'audit writer error'));
  if (options.chainHeadsLogMs !== undefined && options.logger) {
    const logger = options.logger;
    const schema = options.schema ?? 'public';
    worker.headsTimer = setInterval(() => {
      exportChainHeads(options.pool, schema).then(
        (heads) => logger.info({ heads }, 'audit chain heads'),
        (err) => logger.warn({ err: errorLabel(err) }, 'audit chain heads not read'),
      );
    }, options.chainHeadsLogMs);
    worker.headsTimer.unref();
  }
  return worker;
}

/** The audit writer's worker: closing it also waits for its store's background statistics check (see `AuditStore.close`). */
class AuditWriterWorker extends Worker {
  constructor(
    private readonly store: AuditStore,
    name: string,
    processor: Processor,
    opts: WorkerOptions,
  ) {
    // Undefined (BullMQ's default, Redis) unless the connection is BullMQ's PostgreSQL backend's.
    super(name, processor, opts as never, queueBackendOf(opts.connection) as never);
  }

  /** Logs the chains' heads (`chainHeadsLogMs`). */
  headsTimer: NodeJS.Timeout | undefined;

  override async close(force = false): Promise<void> {
    clearInterval(this.headsTimer);
    await super.close(force);
    await this.store.close();
  }
}

/** Transient retries so far: starts that used no attempt (a delayed retry skips the attempt). */
function transientRetries(job: Job): number {
  return Math.max(0, (job.attemptsStarted ?? 0) - (job.attemptsMade ?? 0) - 1);
}

/** `initialMs · 2^retry`, capped at `maxMs`, less up to a fifth at random so writers spread out. */
export function transientDelay(retry: number, backoff: TransientBackoffOptions = {}): number {
  const initial = backoff.initialMs ?? DEFAULT_TRANSIENT_INITIAL_MS;
  const max = Math.max(initial, backoff.maxMs ?? DEFAULT_TRANSIENT_MAX_MS);
  return backoffDelay(retry, { baseMs: initial, capMs: max, spread: 0.2 });
}
