import type { BackendFactory, ConnectionOptions, Queue, Worker } from 'bullmq';
import type { MigrationResultSet } from 'kysely';
import type pg from 'pg';
import type { z } from 'zod';
import { migrate } from '../../migrations/migrate.js';
import type { OperatorActionResult } from '../audit/operator-actions.js';
import { type Timeline, timeline } from '../audit/timeline.js';
import { errorLabel } from '../errors/clean-name.js';
import type { PostgresLedger } from '../ledger/postgres-ledger.js';
import type { KeyLike, LedgerRecord, LedgerStatus } from '../ledger/types.js';
import type { EnqueueResult } from '../operation/enqueue-types.js';
import type { Operation } from '../operation/operation.js';
import type { RerunOutcome } from '../operation/rerun.js';
import type { ResolvingOperation } from '../operation/resolved-result.js';
import { type RelayCounts, relayIntents } from '../ops/intent-relay.js';
import type { RedactionPolicy } from '../redaction/define-policy.js';
import type { Keyring } from '../sealing/keyring.js';
import type { SealedResult } from '../sealing/sealed-result.js';
import type { Logger } from '../shared/logger.js';
import { openWorker, queueBackendOf } from '../shared/queue-backend.js';
import type { IdempotentProcessor } from '../worker/types.js';
import { withIdempotency } from '../worker/with-idempotency.js';
import { type RuntimeConfirmations, runtimeConfirmations } from './confirmations.js';
import type { IdempotencyOptions, IdempotencyRelayOptions } from './options.js';
import { checkQueueName } from './queues.js';
import { resolveOptions } from './resolve-options.js';
import { enqueueMany, enqueueOne } from './runtime-enqueue.js';
import { invalidateWith, rerunWith, resolveWith } from './runtime-operator.js';
import { RuntimeParts } from './runtime-parts.js';
import { relayOptions } from './runtime-relay.js';
import type {
  IdempotentBullProcessor,
  OperatorOptions,
  QueuedOperation,
  RuntimeEnqueueOptions,
  RuntimeResolveOutcome,
} from './runtime-types.js';
import { tokenRequired } from './token-required.js';
import { DEFAULT_RESULT_TIMEOUT_MS, waitForResult } from './wait-result.js';
import { type IdempotencyWorkerOptions, type ProcessorOptions, splitWorkerOptions } from './worker-options.js';

/**
 * Builds the library's runtime from one configuration: the ledger, the audit trail (emitter, and
 * the writer when asked), the queues, the workers and the operator actions all share one
 * Postgres schema, one BullMQ prefix, one keyring and the audit references keyed from it.
 * Parts that cannot work together are refused here, before anything connects, with
 * `IDEMPOTENCY_CONFIG` and the option named in `details.option`.
 *
 * @example
 * const idem = createIdempotency({
 *   postgres: process.env.DATABASE_URL!, schema: 'payments',
 *   redis: process.env.REDIS_URL!, prefix: '{payments}',
 *   keyring: process.env.BQI_KEYRING!,
 *   audit: { writer: true },                       // a single process: write the trail here too
 * });
 * await idem.migrate();
 * idem.worker(chargeOrder, async (input, ctx) => charge(input, ctx.idempotencyKey));
 * await idem.enqueue(chargeOrder, { orderId: 'o-42', amount: 1200 }, { taskId: 'task-42' });
 * // … later
 * console.log((await idem.timeline('task-42')).attempts);
 * await idem.close();
 */
export function createIdempotency(options: IdempotencyOptions): Idempotency {
  return new Idempotency(options);
}

/** The runtime {@link createIdempotency} returns. */
export class Idempotency {
  /** The Postgres schema of every table the runtime reads and writes. */
  readonly schema: string;
  /** The BullMQ prefix of every queue and worker the runtime opens. */
  readonly prefix: string;
  readonly keyring: Keyring;
  /** The connection every queue and worker of the runtime is given. */
  readonly connection: ConnectionOptions;
  /** The audit trail's redaction policy, keyed from {@link keyring}. */
  readonly auditPolicy: RedactionPolicy;
  /** The ledger (advanced use: `claim`, `get`, … outside BullMQ). */
  readonly ledger: PostgresLedger;
  readonly logger: Logger;
  /**
   * Confirmation requests (`ctx.confirm()`): list them, answer one. An answer is audited as the
   * person's decision and wakes the parked jobs through the runtime's queues.
   */
  readonly confirmations: RuntimeConfirmations;

  /** What the runtime built and owns: its ledger, store, queues, workers, audit parts, relay. */
  private readonly parts: RuntimeParts;

  constructor(options: IdempotencyOptions) {
    // Everything is checked before anything connects: a refused configuration leaves nothing open.
    const parts = new RuntimeParts(resolveOptions(options));
    const o = parts.options;
    this.parts = parts;
    this.schema = o.schema;
    this.prefix = o.prefix;
    this.keyring = o.keyring;
    this.auditPolicy = o.auditPolicy;
    this.connection = parts.connection;
    this.logger = o.logger;
    this.ledger = parts.ledger;
    this.confirmations = runtimeConfirmations({
      pool: parts.pool,
      schema: o.schema,
      store: parts.store,
      policy: o.auditPolicy,
      queue: (name) => parts.queues.get(name),
    });
  }

  /**
   * The BullMQ backend factory of the runtime's queues, for a Worker or `QueueEvents` you build
   * yourself: `createPostgresBackend` when `redis` is a `postgres://` URL (BullMQ's PostgreSQL
   * backend), undefined on Redis (BullMQ's default).
   *
   * @example
   * new QueueEvents(idem.queueName(chargeOrder), { connection: idem.connection, prefix: idem.prefix }, idem.queueBackend);
   */
  get queueBackend(): BackendFactory | undefined {
    return queueBackendOf(this.connection);
  }

  /** The runtime's pool: the one given, or the one it opened (ended by {@link close}). */
  get pool(): pg.Pool {
    return this.parts.pool;
  }

  /**
   * The wrapped BullMQ processor of `operation`, with the runtime's ledger, keyring, audit
   * emitter, logger and observer: for a Worker you build yourself (a sandboxed processor file,
   * NestJS: assign it as a WorkerHost's `process`). Give it the Worker's lock and stall settings
   * (`worker`) so the lease and retention are checked against them, and the runtime's
   * `connection` and `prefix` to the Worker. It takes (job, token, signal), as BullMQ calls it; a
   * call without the token is refused before anything runs (`IDEMPOTENCY_CONFIG`, option
   * `token`, not retried): without it duplicates could not wait for the attempt that runs.
   *
   * @example
   * const processor = idem.processor(chargeOrder, async (input, ctx) => charge(input, ctx.idempotencyKey));
   * new Worker(idem.queueName(chargeOrder), processor, { connection: idem.connection, prefix: idem.prefix });
   */
  processor<S extends z.ZodType, R, P extends string, DB = unknown>(
    operation: Operation<S, R, P>,
    processor: IdempotentProcessor<z.output<S>, R, DB>,
    options: ProcessorOptions<DB> = {},
  ): IdempotentBullProcessor<R, P> {
    this.parts.assertOpen();
    // Known by name from now on: `resolve` checks and seals a found result as this operation would.
    if (!this.parts.operations.has(operation.name))
      this.parts.operations.set(operation.name, operation as ResolvingOperation);
    const audit = this.parts.auditEmitter();
    const wrapped = withIdempotency(operation, processor, {
      ledger: this.ledger,
      keyring: this.keyring,
      identifierPolicy: this.auditPolicy,
      logger: this.logger,
      logErrorText: this.parts.options.logErrorText,
      ...(audit ? { audit } : {}),
      ...(this.parts.options.observer ? { observer: this.parts.options.observer } : {}),
      ...(this.parts.options.owner ? { owner: this.parts.options.owner } : {}),
      ...options,
    });
    return tokenRequired(operation.name, wrapped, this.logger);
  }

  /**
   * A BullMQ `Worker` on the operation's queue (its `queue`, else its name), on the runtime's
   * connection and prefix, running `processor` wrapped by `withIdempotency`. Closed by
   * {@link close}. `workerOptions` are BullMQ's (concurrency, lockDuration…; the lease and
   * retention are checked against the lock and stall settings given here) and the wrapper's
   * (`db`, `jobOptions`, `inProgressPollMs`); a `connection` or `prefix` other than the
   * runtime's is refused.
   *
   * @example
   * const worker = idem.worker(chargeOrder, async (input, ctx) => {
   *   const res = await payments.charge(input, { idempotencyKey: ctx.idempotencyKey, signal: ctx.signal });
   *   return { chargeId: res.id, receipt: res.receipt };
   * }, { concurrency: 20 });
   */
  worker<S extends z.ZodType, R, P extends string, DB = unknown>(
    operation: Operation<S, R, P>,
    processor: IdempotentProcessor<z.output<S>, R, DB>,
    workerOptions: IdempotencyWorkerOptions<DB> = {},
  ): Worker<unknown, SealedResult<R, P>> {
    this.parts.assertOpen();
    const name = this.queueName(operation);
    const { bullmq, wrapper } = splitWorkerOptions(workerOptions, { connection: this.connection, prefix: this.prefix });
    const worker = openWorker<unknown, SealedResult<R, P>>(name, this.processor(operation, processor, wrapper), bullmq);
    // Without a listener an 'error' event (Redis gone, a lock lost) would end the process.
    worker.on('error', (err) => this.logger.error({ queue: name, err: errorLabel(err) }, 'worker error'));
    this.parts.workers.push(worker as Worker);
    this.parts.timings.set(name, wrapper.worker ?? {});
    return worker;
  }

  /**
   * Enqueues one intended operation on its queue, its key made now, before the first attempt.
   * Declared sensitive input is sealed with the runtime's keyring; retention is checked against
   * the job options and the lock settings of the runtime's worker for that queue (if it built one).
   *
   * @example
   * const { jobId, added } = await idem.enqueue(chargeOrder, { orderId: 'o-42', amount: 1200 }, { taskId: 'task-42' });
   */
  async enqueue<S extends z.ZodType, R, P extends string>(
    operation: Operation<S, R, P>,
    input: z.input<S>,
    options: RuntimeEnqueueOptions = {},
  ): Promise<EnqueueResult> {
    this.parts.assertOpen();
    return enqueueOne(this.parts.enqueue, operation, this.queue(operation), input, options);
  }

  /**
   * Waits until a job of `operation` has finished and returns its result exactly as the processor
   * returned it (BullMQ holds it sealed; this opens it with the runtime's keyring). For programs
   * and tests that enqueue and need the answer; a service usually answers from its own state.
   * @throws JobFailedError (`IDEMPOTENCY_JOB_FAILED`, the job's `failedReason` as message) or
   * ResultTimeoutError (`IDEMPOTENCY_RESULT_TIMEOUT`)
   *
   * @example
   * const { jobId } = await idem.enqueue(chargeOrder, { orderId: 'o-42', amount: 1200 });
   * const { chargeId } = await idem.result(chargeOrder, jobId);
   */
  async result<S extends z.ZodType, R, P extends string>(
    operation: Operation<S, R, P>,
    jobId: string,
    options: { timeoutMs?: number } = {},
  ): Promise<R> {
    this.parts.assertOpen();
    return waitForResult<R>(this.queue(operation), jobId, this.keyring, options.timeoutMs ?? DEFAULT_RESULT_TIMEOUT_MS);
  }

  /**
   * {@link enqueue} for many operations in one atomic `addBulk`; one result per item, in order.
   * Durable intents are recorded in one statement; every item must then have the same `durable`
   * and `tx`.
   *
   * @example
   * await idem.enqueueBulk(chargeOrder, orders.map((o) => ({ input: o, options: { taskId: o.taskId } })));
   */
  async enqueueBulk<S extends z.ZodType, R, P extends string>(
    operation: Operation<S, R, P>,
    items: { input: z.input<S>; options?: RuntimeEnqueueOptions }[],
  ): Promise<EnqueueResult[]> {
    this.parts.assertOpen();
    return enqueueMany(this.parts.enqueue, operation, this.queue(operation), items);
  }

  /**
   * Runs the relay once now (whether or not `intents.relay` runs one here): recorded intents
   * committed since are added to BullMQ, and any whose job vanished before a claim is added
   * again; claimed ones are deleted. Bounded batches; several relays at once cooperate.
   *
   * @example
   * const { relayed, readded } = await idem.relayIntents();
   */
  relayIntents(options: Omit<IdempotencyRelayOptions, 'everyMs' | 'listen'> = {}): Promise<RelayCounts> {
    this.parts.assertOpen();
    return relayIntents(relayOptions(this.parts.relayParts(), options));
  }

  /**
   * The runtime's BullMQ queue of an operation (or of a queue name), on its connection and prefix:
   * to read jobs, or to listen with `QueueEvents`. Closed by {@link close}.
   *
   * @example
   * const job = await idem.queue(chargeOrder).getJob(jobId);
   */
  queue(operation: QueuedOperation | string): Queue {
    this.parts.assertOpen();
    return this.parts.queues.get(typeof operation === 'string' ? checkQueueName(operation) : this.queueName(operation));
  }

  /**
   * The queue name of an operation: its `queue`, else its name.
   *
   * @example
   * new QueueEvents(idem.queueName(chargeOrder), { connection: idem.connection, prefix: idem.prefix });
   */
  queueName(operation: QueuedOperation): string {
    return checkQueueName(operation.definition.queue ?? operation.name);
  }

  /**
   * The ordered story of a task (its id) or of one operation (`{ operationKey }`): attempts,
   * takeovers, replays, decisions, confirmations and final ledger states. This process's buffered
   * audit events are sent first; they are in the story once a writer has stored them.
   *
   * @example
   * const story = await idem.timeline('task-42');
   * console.log(story.attempts.map((a) => `${a.operationId} epoch ${a.epoch}: ${a.start} → ${a.end ?? 'running'}`));
   */
  async timeline(task: string | { taskId: string } | { operationKey: string }): Promise<Timeline> {
    await this.parts.flush();
    return timeline(typeof task === 'string' ? { taskId: task } : task, {
      store: this.parts.store,
      ledger: this.ledger,
    });
  }

  /**
   * The ledger record of a key (its parts or its bounded form, `ctx.idempotencyKey`), or null.
   * Results and error text stay sealed: `unseal(record.result, idem.keyring)` opens a result.
   *
   * @example
   * const record = await idem.inspect(idempotencyKey);
   * console.log(record?.status, record?.epoch);
   */
  inspect(key: KeyLike): Promise<LedgerRecord | null> {
    return this.ledger.get(key);
  }

  /**
   * Evicts a key whatever its state so that its next claim runs again, fencing any attempt still
   * holding it; audited as the actor's decision, written to the trail at once. Follow it with
   * {@link rerun} to run the key's finished job again.
   *
   * @example
   * await idem.invalidate(key, { actor: 'alice', reason: 'refund issued twice' });
   */
  invalidate(key: KeyLike, by: OperatorOptions): Promise<OperatorActionResult & { previousStatus: LedgerStatus }> {
    return invalidateWith(this.parts, key, by);
  }

  /**
   * Settles an `unknown` record: `{ committed: true, result }` or `{ committed: false }` (the
   * next attempt runs it). A committed result is recorded as the operation's own completion
   * records one, so a replay of the key returns what a normal completion's replay returns: with
   * the key's operation known (given as `operation`, or one this runtime built a worker or
   * processor for, by the name the ledger records), the result is checked by its result schema
   * (a refusal throws `IDEMPOTENCY_INVALID_INPUT` and records nothing) and sealed with its
   * `publicResult` fields in clear beside `$sealed`; with no operation known it is sealed whole.
   * Audited like {@link invalidate}.
   *
   * @example
   * await idem.resolve(key, { committed: true, result: { chargeId: 'ch_1' }, operation: chargeOrder }, { actor: 'bob', reason: 'found in the PSP dashboard' });
   * await idem.resolve(key, { committed: false }, { actor: 'bob', reason: 'no charge at the provider' });
   */
  resolve(key: KeyLike, outcome: RuntimeResolveOutcome, by: OperatorOptions): Promise<OperatorActionResult> {
    return resolveWith(this.parts, key, outcome, by);
  }

  /**
   * Runs the job of a key again, after {@link invalidate}: the queue and job id come from the
   * key's ledger record (`queue` when it names none, a claim made outside BullMQ).
   *
   * @example
   * await idem.invalidate(key, { actor: 'alice', reason: 'resend' });
   * const r = await idem.rerun(key);   // { kind: 'retried', from: 'completed', … }
   */
  async rerun(key: KeyLike, options: { queue?: string } = {}): Promise<RerunOutcome> {
    this.parts.assertOpen();
    return rerunWith(this.parts, key, options.queue);
  }

  /**
   * Creates or upgrades the library's tables in the runtime's schema (safe from many processes at once).
   *
   * @example
   * await idem.migrate();   // at deploy, or at start in a single-process application
   */
  migrate(options: { to?: 'latest' | 'down' | 'none' } = {}): Promise<MigrationResultSet> {
    return migrate({ pool: this.pool, schema: this.schema, logger: this.logger, ...options });
  }

  /**
   * Sends the audit events this process holds and waits until each batch is in Redis (or in the
   * Postgres outbox).
   *
   * @example
   * await idem.flush();
   */
  async flush(): Promise<void> {
    await this.parts.flush();
  }

  /**
   * Closes everything the runtime opened, producers of audit events first: its workers (their
   * active jobs finish), the emitter (flushed), the audit writer, its queues, the ledger's
   * background work, then the pool it opened and the cluster client it opened. A pool or a Redis
   * client you gave it stays open. Idempotent. Events still in the audit queue are written by
   * the next writer that runs.
   *
   * @example
   * process.once('SIGTERM', () => idem.close());
   */
  close(): Promise<void> {
    return this.parts.close();
  }
}
