import { hostname } from 'node:os';
import type { BackendFactory, ConnectionOptions, Job, Queue, Worker } from 'bullmq';
import type { MigrationResultSet } from 'kysely';
import type pg from 'pg';
import type { z } from 'zod';
import { migrate } from '../../migrations/migrate.js';
import { AuditStore } from '../audit/audit-store.js';
import { AuditEmitter } from '../audit/emitter.js';
import { invalidateKey, type OperatorActionResult, resolveKey } from '../audit/operator-actions.js';
import { auditRedactor } from '../audit/redact-event.js';
import { type Timeline, timeline } from '../audit/timeline.js';
import { type AnswerResult, answerConfirmation, listConfirmations } from '../confirm/answer.js';
import type { Confirmation } from '../confirm/types.js';
import { checkSchema, DEFAULT_SCHEMA } from '../db/connection.js';
import { errorLabel } from '../errors/clean-name.js';
import { IdempotencyConfigError, IllegalTransitionError } from '../errors/errors.js';
import type { IntentTx } from '../intents/executor.js';
import { intentEvent } from '../intents/intent-events.js';
import { IntentListener } from '../intents/listener.js';
import { createAuditWriter, DEFAULT_AUDIT_QUEUE } from '../jobs/audit-writer.js';
import { toKey } from '../ledger/claim-rows.js';
import { PostgresLedger } from '../ledger/postgres-ledger.js';
import type { KeyLike, LedgerRecord, LedgerStatus } from '../ledger/types.js';
import type { EnqueueOptions, EnqueueResult } from '../operation/enqueue-types.js';
import type { Operation } from '../operation/operation.js';
import { type ResolvingOperation, resolvedResult } from '../operation/resolved-result.js';
import type { WorkerTiming } from '../operation/retry-window.js';
import { IntentRelay, type RelayCounts, relayIntents } from '../ops/intent-relay.js';
import { jobIdFor } from '../producer/enqueue.js';
import { type RerunOutcome, rerun } from '../producer/rerun.js';
import type { RedactionPolicy } from '../redaction/define-policy.js';
import { type Keyring, parseKeyringSpec } from '../sealing/keyring.js';
import type { SealedResult } from '../sealing/sealed-result.js';
import type { Logger } from '../shared/logger.js';
import { openWorker, queueBackendOf } from '../shared/queue-backend.js';
import type { IdempotentProcessor } from '../worker/types.js';
import { withIdempotency } from '../worker/with-idempotency.js';
import { runtimeAuditPolicy } from './audit-policy.js';
import { runtimeLogger, SILENT_LOGGER } from './default-logger.js';
import { DEFAULT_PREFIX, type IdempotencyOptions, type IdempotencyRelayOptions } from './options.js';
import { type QueueConnection, queueConnection } from './queue-connection.js';
import { checkQueueName, RuntimeQueues } from './queues.js';
import { tokenRequired } from './token-required.js';
import { DEFAULT_RESULT_TIMEOUT_MS, waitForResult } from './wait-result.js';
import { type IdempotencyWorkerOptions, type ProcessorOptions, splitWorkerOptions } from './worker-options.js';

/** The BullMQ processor `idem.processor()` returns: three parameters, so BullMQ passes its AbortSignal. */
export type IdempotentBullProcessor<R, P extends string> = (
  job: Job,
  token?: string,
  signal?: AbortSignal,
) => Promise<SealedResult<R, P>>;

/** What names an operation's queue: any defined operation. */
export type QueuedOperation = { readonly name: string; readonly definition: { readonly queue?: string | undefined } };

/**
 * What `idem.enqueue` takes: the producer's options (the keyring is the runtime's), and where the
 * intent is recorded (docs/intents.md).
 */
export type RuntimeEnqueueOptions = Omit<EnqueueOptions, 'keyring' | 'durable'> & {
  /**
   * Records the intent in the runtime's Postgres, then adds the job at once.
   * @defaultValue the runtime's `intents.durable`
   */
  durable?: boolean;
  /**
   * Records the intent in the caller's transaction only (a `pg` client inside `BEGIN`, or a
   * kysely `Transaction`): the job is added by a relay after the commit, never for a rollback.
   */
  tx?: IntentTx;
};

/** Default polling interval of the in-process relay. */
const DEFAULT_RELAY_EVERY_MS = 5_000;

/**
 * What `idem.resolve` takes: what became of the key's side effect; with `committed`, the result a
 * replay returns, and optionally the key's operation (else the runtime's own of that name).
 */
export type RuntimeResolveOutcome =
  | { committed: true; result: unknown; operation?: ResolvingOperation }
  | { committed: false };

/** Who performs an operator action, and why (kept in the ledger's record and in its `user` audit event). */
export type OperatorOptions = { actor: string; reason: string };

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
  private readonly logErrorText: boolean;
  /**
   * Confirmation requests (`ctx.confirm()`): list them, answer one. An answer is audited as the
   * person's decision and wakes the parked jobs through the runtime's queues.
   */
  readonly confirmations: {
    /**
     * @example
     * for (const c of await idem.confirmations.list({ pending: true })) console.log(c.id, c.reason);
     */
    list(options?: { pending?: boolean; limit?: number; after?: string }): Promise<Confirmation[]>;
    /**
     * @example
     * await idem.confirmations.answer('cf-12', { approve: true, actor: 'alice', comment: 'checked the invoice' });
     */
    answer(id: string, answer: { approve: boolean; actor: string; comment?: string }): Promise<AnswerResult>;
  };

  private readonly redis: QueueConnection;
  private readonly queues: RuntimeQueues;
  private readonly store: AuditStore;
  private readonly audit: { queue: string; maxBatch?: number; maxDelayMs?: number } | undefined;
  private readonly owner: string | undefined;
  private readonly observer: IdempotencyOptions['observer'];
  private emitter: AuditEmitter | undefined;
  private readonly writer: Worker | undefined;
  private readonly workers: Worker[] = [];
  /** The lock and stall settings of the worker built for each queue: `enqueue` checks retention against them. */
  private readonly timings = new Map<string, WorkerTiming>();
  /** The operations this runtime built a worker or processor for, by name: `resolve` uses them. */
  private readonly operations = new Map<string, ResolvingOperation>();
  private readonly durableByDefault: boolean;
  /** The in-process relay (`intents.relay`), and its listener. */
  private readonly relay: { relay: IntentRelay; listener: IntentListener | undefined } | undefined;
  private closing: Promise<void> | undefined;

  constructor(options: IdempotencyOptions) {
    if (typeof options !== 'object' || options === null) {
      throw new IdempotencyConfigError('createIdempotency needs its options', { option: 'options' });
    }
    // Everything is checked before anything connects: a refused configuration leaves nothing open.
    this.schema = checkSchema(options.schema ?? DEFAULT_SCHEMA);
    this.prefix = checkPrefix(options.prefix ?? DEFAULT_PREFIX);
    this.keyring = resolveKeyring(options.keyring);
    const audit = options.audit === false ? undefined : (options.audit ?? {});
    this.auditPolicy = runtimeAuditPolicy(this.keyring, audit?.redaction, options.valueScanner);
    const postgres = checkPostgres(options.postgres);
    this.redis = queueConnection(options.redis, this.prefix);
    this.connection = this.redis.connection;
    this.logger = runtimeLogger(options.logger, options.valueScanner);
    this.logErrorText = options.logErrorText ?? (options.logger === undefined && this.logger !== SILENT_LOGGER);
    this.owner = options.owner;
    this.observer = options.observer;
    this.audit = audit && {
      queue: checkQueueName(audit.queue ?? DEFAULT_AUDIT_QUEUE),
      ...(audit.maxBatch === undefined ? {} : { maxBatch: audit.maxBatch }),
      ...(audit.maxDelayMs === undefined ? {} : { maxDelayMs: audit.maxDelayMs }),
    };

    const prepared = options.preparedStatements === undefined ? {} : { preparedStatements: options.preparedStatements };
    this.ledger = new PostgresLedger({
      ...(typeof postgres === 'string' ? { connectionString: postgres } : { pool: postgres }),
      schema: this.schema,
      logger: this.logger,
      ...(options.poolSize === undefined ? {} : { poolSize: options.poolSize }),
      ...prepared,
    });
    const pool = this.ledger.pool;
    this.store = new AuditStore(pool, this.schema, this.auditPolicy, { ...prepared, logger: this.logger });
    this.queues = new RuntimeQueues(this.connection, this.prefix, this.logger);
    if (audit?.writer && this.audit) {
      this.writer = createAuditWriter({
        connection: this.connection,
        pool,
        schema: this.schema,
        prefix: this.prefix,
        queueName: this.audit.queue,
        redactionPolicy: this.auditPolicy,
        logger: this.logger,
        ...(audit.writerConcurrency === undefined ? {} : { concurrency: audit.writerConcurrency }),
        ...prepared,
      });
    }
    this.durableByDefault = options.intents?.durable === true;
    const relay = options.intents?.relay;
    if (relay) this.relay = this.startRelay(relay === true ? {} : relay);
    this.confirmations = {
      list: (opts = {}) => listConfirmations({ pool, schema: this.schema, ...opts }),
      answer: (id, a) =>
        answerConfirmation({
          pool,
          schema: this.schema,
          id,
          approve: a.approve,
          actor: a.actor,
          ...(a.comment === undefined ? {} : { comment: a.comment }),
          auditStore: this.store,
          // answered_by holds the actor as the trail tells it: the same ref the store's event holds
          policy: this.auditPolicy,
          via: 'library',
          queue: (name) => this.queues.get(name),
        }),
    };
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
    return this.ledger.pool;
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
    this.assertOpen();
    // Known by name from now on: `resolve` checks and seals a found result as this operation would.
    if (!this.operations.has(operation.name)) this.operations.set(operation.name, operation as ResolvingOperation);
    const audit = this.auditEmitter();
    const wrapped = withIdempotency(operation, processor, {
      ledger: this.ledger,
      keyring: this.keyring,
      identifierPolicy: this.auditPolicy,
      logger: this.logger,
      logErrorText: this.logErrorText,
      ...(audit ? { audit } : {}),
      ...(this.observer ? { observer: this.observer } : {}),
      ...(this.owner ? { owner: this.owner } : {}),
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
    this.assertOpen();
    const name = this.queueName(operation);
    const { bullmq, wrapper } = splitWorkerOptions(workerOptions, { connection: this.connection, prefix: this.prefix });
    const worker = openWorker<unknown, SealedResult<R, P>>(name, this.processor(operation, processor, wrapper), bullmq);
    // Without a listener an 'error' event (Redis gone, a lock lost) would end the process.
    worker.on('error', (err) => this.logger.error({ queue: name, err: errorLabel(err) }, 'worker error'));
    this.workers.push(worker as Worker);
    this.timings.set(name, wrapper.worker ?? {});
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
    this.assertOpen();
    const result = await operation.enqueue(this.queue(operation), input, this.enqueueOptions(operation, options));
    this.auditAccepted(operation, [result], [options.taskId]);
    return result;
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
    this.assertOpen();
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
    this.assertOpen();
    // One durable object for the whole batch: the producer records every intent in one statement.
    const where = items.map((it) => this.durableOf(it.options ?? {}));
    const shared = where[0];
    if (where.some((d) => d?.tx !== shared?.tx || (d === undefined) !== (shared === undefined))) {
      throw new IdempotencyConfigError('enqueueBulk: every item must have the same `durable` and `tx`', {
        option: 'durable',
      });
    }
    const results = await operation.enqueueBulk(
      this.queue(operation),
      items.map((it) => {
        const own = this.enqueueOptions(operation, it.options ?? {});
        return { input: it.input, options: shared ? { ...own, durable: shared } : own };
      }),
    );
    this.auditAccepted(
      operation,
      results,
      items.map((it) => it.options?.taskId),
    );
    return results;
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
    this.assertOpen();
    return relayIntents(this.relayOptions(options));
  }

  /**
   * The runtime's BullMQ queue of an operation (or of a queue name), on its connection and prefix:
   * to read jobs, or to listen with `QueueEvents`. Closed by {@link close}.
   *
   * @example
   * const job = await idem.queue(chargeOrder).getJob(jobId);
   */
  queue(operation: QueuedOperation | string): Queue {
    this.assertOpen();
    return this.queues.get(typeof operation === 'string' ? checkQueueName(operation) : this.queueName(operation));
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
    await this.emitter?.flush();
    return timeline(typeof task === 'string' ? { taskId: task } : task, { store: this.store, ledger: this.ledger });
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
    return invalidateKey(this.ledger, key, { actor: by.actor, reason: by.reason, store: this.store });
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
  async resolve(key: KeyLike, outcome: RuntimeResolveOutcome, by: OperatorOptions): Promise<OperatorActionResult> {
    const options = { actor: by.actor, reason: by.reason, store: this.store };
    if (!outcome.committed) return resolveKey(this.ledger, key, { committed: false }, options);
    const record = await this.ledger.get(key);
    if (!record) throw new IllegalTransitionError({ key: toKey(key), from: null, action: 'resolve' });
    const operation = outcome.operation ?? this.operations.get(record.operation);
    const result = resolvedResult(record, outcome.result, this.keyring, { operation });
    return resolveKey(this.ledger, record.key, { committed: true, result }, options);
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
    this.assertOpen();
    const record = await this.ledger.get(key);
    const name = options.queue ?? record?.queue;
    if (!name) {
      throw new IdempotencyConfigError(
        'rerun: the key has no ledger record naming its queue (claimed outside BullMQ, or swept): give { queue }',
        { option: 'queue' },
      );
    }
    const k = record?.key ?? key;
    return rerun(this.queues.get(name), k, { jobId: record?.jobId ?? jobIdFor(k) });
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
    await this.emitter?.flush();
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
    this.closing ??= this.shutDown();
    return this.closing;
  }

  private async shutDown(): Promise<void> {
    const failures: unknown[] = [];
    const step = async (what: () => Promise<unknown>) => {
      try {
        await what();
      } catch (err) {
        failures.push(err);
      }
    };
    if (this.relay) {
      const { relay, listener } = this.relay;
      await step(async () => {
        await listener?.stop();
        await relay.stop();
      });
    }
    await step(() => Promise.all(this.workers.map((w) => w.close())));
    if (this.emitter) {
      const emitter = this.emitter;
      await step(() => emitter.close());
    }
    if (this.writer) {
      const writer = this.writer;
      await step(() => writer.close());
    }
    await step(() => this.queues.close());
    await step(() => this.store.close());
    await step(() => this.ledger.close());
    await step(() => this.redis.close());
    if (failures.length > 0) throw failures[0];
  }

  /** The emitter, made on first use: a runtime used only for operator actions opens no audit queue. */
  private auditEmitter(): AuditEmitter | undefined {
    if (!this.audit || this.emitter) return this.emitter;
    this.emitter = new AuditEmitter({
      queue: this.queues.get(this.audit.queue),
      pool: this.pool,
      schema: this.schema,
      redact: auditRedactor(this.auditPolicy),
      redactionPolicy: this.auditPolicy,
      logger: this.logger,
      actorId: this.actorId(),
      ...(this.audit.maxBatch === undefined ? {} : { maxBatch: this.audit.maxBatch }),
      ...(this.audit.maxDelayMs === undefined ? {} : { maxDelayMs: this.audit.maxDelayMs }),
    });
    return this.emitter;
  }

  private enqueueOptions(operation: QueuedOperation, options: RuntimeEnqueueOptions): EnqueueOptions {
    const timing = this.timings.get(this.queueName(operation));
    const { durable: _durable, tx: _tx, ...rest } = options;
    const durable = this.durableOf(options);
    return { ...(timing ? { worker: timing } : {}), ...rest, keyring: this.keyring, ...(durable ? { durable } : {}) };
  }

  /** Where an enqueue records its intent: the caller's transaction, the runtime's pool, or nowhere. */
  private durableOf(options: RuntimeEnqueueOptions): EnqueueOptions['durable'] {
    if (options.tx) return { tx: options.tx, schema: this.schema };
    if (options.durable ?? this.durableByDefault) return { pool: this.pool, schema: this.schema };
    return undefined;
  }

  /** An intent recorded outside a transaction is durable now: its acceptance goes to the trail. */
  private auditAccepted(
    operation: QueuedOperation & { name: string },
    results: EnqueueResult[],
    taskIds: (string | undefined)[],
  ): void {
    const emitter = results.some((r) => r.intent === 'recorded' && !r.deferred) ? this.auditEmitter() : undefined;
    if (!emitter) return;
    const queue = this.queueName(operation);
    results.forEach((r, i) => {
      if (r.intent !== 'recorded' || r.deferred) return;
      const row = {
        key: r.idempotencyKey,
        operation: operation.name,
        queue,
        jobId: r.jobId,
        jobName: operation.name,
        taskId: taskIds[i],
      };
      emitter.record(
        intentEvent({ ...row, data: null, opts: {} }, { kind: 'accepted', deferred: false }, this.actorId()),
      );
    });
  }

  private actorId(): string {
    return this.owner ? `worker:${this.owner}` : `worker:${hostname()}:${process.pid}`;
  }

  private relayOptions(options: Omit<IdempotencyRelayOptions, 'everyMs' | 'listen'>) {
    const emitter = this.auditEmitter();
    return {
      pool: this.pool,
      schema: this.schema,
      queue: (name: string) => this.queues.get(name),
      actorId: this.actorId(),
      ...(emitter ? { emitter } : {}),
      ...(options.batchSize === undefined ? {} : { batchSize: options.batchSize }),
      ...(options.recheckAfterMs === undefined ? {} : { recheckAfterMs: options.recheckAfterMs }),
    };
  }

  /** The in-process relay: a run at once, then one per notification (a commit) and per `everyMs`. */
  private startRelay(options: IdempotencyRelayOptions): { relay: IntentRelay; listener: IntentListener | undefined } {
    const relay = new IntentRelay(this.relayOptions(options), this.logger);
    const listener =
      options.listen === false
        ? undefined
        : new IntentListener(this.pool, this.schema, () => void relay.run(), this.logger);
    const everyMs = options.everyMs ?? DEFAULT_RELAY_EVERY_MS;
    void (async () => {
      try {
        await listener?.start();
      } catch (err) {
        this.logger.warn({ err: errorLabel(err) }, 'intent relay could not listen: polling only');
      }
      if (this.closing) return;
      await relay.run();
      relay.every(everyMs);
    })();
    return { relay, listener };
  }

  private assertOpen(): void {
    if (this.closing) {
      throw new IdempotencyConfigError('the runtime is closed (idem.close() was called)', { option: 'closed' });
    }
  }
}

function resolveKeyring(keyring: Keyring | string | undefined): Keyring {
  if (typeof keyring === 'string' && keyring.trim() !== '') return parseKeyringSpec(keyring);
  if (typeof keyring === 'object' && keyring !== null && typeof (keyring as Keyring).seal === 'function') {
    return keyring;
  }
  throw new IdempotencyConfigError(
    'createIdempotency needs a keyring: defineKeyring({ keys: [...] }), or a spec as BQI_KEYRING takes it (k1:base64:…)',
    { option: 'keyring' },
  );
}

function checkPostgres(postgres: string | pg.Pool | undefined): string | pg.Pool {
  if (typeof postgres === 'string' && postgres !== '') return postgres;
  if (typeof postgres === 'object' && postgres !== null && typeof (postgres as pg.Pool).connect === 'function') {
    return postgres;
  }
  throw new IdempotencyConfigError('createIdempotency needs `postgres`: a connection string or a pg.Pool', {
    option: 'postgres',
  });
}

function checkPrefix(prefix: string): string {
  if (typeof prefix !== 'string' || prefix === '') {
    throw new IdempotencyConfigError('prefix must be a non-empty string', { option: 'prefix' });
  }
  return prefix;
}
