import { hostname } from 'node:os';
import type { Queue, Worker } from 'bullmq';
import type pg from 'pg';
import type { Logger } from 'pino';
import { collectDefaultMetrics, Registry } from 'prom-client';
import { AuditStore, type WriteBatchResult } from '../audit/audit-store.js';
import { AuditEmitter, type AuditRedactor } from '../audit/emitter.js';
import { auditRedactor } from '../audit/redact-event.js';
import { redriveFailedAuditBatches } from '../audit/redrive-failed.js';
import { auditPolicyFor } from '../config/audit-policy.js';
import { type Config, describeUrl } from '../config/env.js';
import { describeRedisUrl } from '../config/redis-url.js';
import { checkRedis, connectPostgres, openRedis, type RedisConnection } from '../config/services.js';
import { confirmationHttpHandler } from '../confirm/http-handler.js';
import { type ConsoleOptions, consoleHandler } from '../console/console-handler.js';
import { errorLabel } from '../errors/clean-name.js';
import { ERROR_CODES, IdempotencyError } from '../errors/idempotency-error.js';
import { IntentListener } from '../intents/listener.js';
import { createBackfillWorker, DEFAULT_BACKFILL_QUEUE } from '../jobs/audit-backfill.js';
import { createAuditWriter } from '../jobs/audit-writer.js';
import {
  createSweeperWorker,
  DEFAULT_SWEEPER_QUEUE,
  sweeperSchedule,
  sweeperScheduled,
} from '../jobs/ledger-sweeper.js';
import { PostgresLedger } from '../ledger/postgres-ledger.js';
import { readReplicationFacts, replicationRisk } from '../ledger/replication-check.js';
import { OperationsMetrics } from '../observability/operations-metrics.js';
import { KeptSchedule } from '../shared/kept-schedule.js';
import { openQueue } from '../shared/queue-backend.js';
import { healthRoutes } from './health-routes.js';
import { type HttpRoute, OpsHttpServer } from './http-server.js';
import { IntentRelay } from './intent-relay.js';
import {
  createRelayWorker,
  DEFAULT_RELAY_EVERY_MS,
  DEFAULT_RELAY_QUEUE,
  relayMetrics,
  relaySchedule,
  relayScheduled,
} from './intent-relay-worker.js';
import { createLogger } from './logger.js';
import { assertMigrated } from './not-migrated.js';
import { settleWithin } from './settle.js';

/** Time allowed, after the deadline, for force-closing before the process gives up waiting. */
const FORCE_CLOSE_MS = 2_000;

/** Timeout of the start-up reachability checks of Postgres and Redis. */
const START_CHECK_TIMEOUT_MS = 5_000;

/** The HTTP server could not listen (the port is taken, the host is not this machine's). */
export class HttpListenError extends IdempotencyError<typeof ERROR_CODES.httpListen> {
  readonly host: string;
  readonly port: number;
  readonly reason: string;

  constructor(host: string, port: number, reason: string) {
    super(ERROR_CODES.httpListen, `cannot serve HTTP on ${host}:${port}: ${reason}`, { host, port, reason });
    this.host = host;
    this.port = port;
    this.reason = reason;
  }
}

export type OperationsProcess = {
  /**
   * Stops the workers: active jobs may finish within `timeoutMs` (default
   * `BQI_SHUTDOWN_TIMEOUT_MS`); after it, workers are force-closed and `clean` is false.
   * Idempotent: later calls return the first call's promise.
   */
  close(options?: { timeoutMs?: number }): Promise<{ clean: boolean }>;
  readonly workers: { auditWriter: Worker; backfill: Worker; sweeper: Worker; relay: Worker };
  /** The sweeper's and the intent relay's schedules, kept in Redis: re-created when a check finds one missing. */
  readonly schedules: { sweeper: KeptSchedule; relay: KeptSchedule };
  /** The intent relay (docs/intents.md): `totals` counts what it relayed, re-added and deleted. */
  readonly relay: IntentRelay;
  /** The HTTP server, when `BQI_HTTP_PORT` is set: mount more routes with `http.route()`. */
  readonly http: OpsHttpServer | undefined;
  readonly logger: Logger;
};

export type OperationsProcessOptions = {
  logger?: Logger;
  startCheckTimeoutMs?: number;
  /**
   * For how long one `/readyz` check answers every probe (0: each probe checks).
   * @defaultValue 1000
   */
  readyCacheMs?: number;
  /** More routes for the HTTP server (served only when `config.httpPort` is set). */
  routes?: HttpRoute[];
  /**
   * Where `/metrics` registers the process's metrics (and Node's default ones): pass yours to
   * serve your own beside them. @defaultValue a new `Registry`
   */
  registry?: Registry;
  /**
   * The intent relay: scheduled every `everyMs` (re-created when missing, like the sweeper's), and
   * woken by each commit that recorded an intent (`LISTEN`, one connection held; `listen: false`
   * behind a pooler in transaction mode).
   * @defaultValue `{ everyMs: 5000, listen: true }`
   */
  relay?: { everyMs?: number; listen?: boolean; batchSize?: number; recheckAfterMs?: number };
  /**
   * The operator console at `/console` (docs/console.md), for the operators of `BQI_OPERATORS`:
   * `true`, or its options (who may open sealed values, operations whose result schemas check a
   * resolved result, the public origin behind a proxy). @defaultValue `BQI_CONSOLE=on`
   */
  console?: boolean | Pick<ConsoleOptions, 'decrypt' | 'operations' | 'origins' | 'sessionIdleMs'>;
};

/** The registry of `/metrics`, with Node's default metrics (once per registry). */
function processRegistry(options: OperationsProcessOptions): Registry {
  const registry = options.registry ?? new Registry();
  if (!registry.getSingleMetric('process_cpu_seconds_total')) collectDefaultMetrics({ register: registry });
  return registry;
}

// The emitter here carries only the sweeper's summary events (counts, no payloads). The
// redaction policy is applied where events are created (the wrapper, with the operation's
// policy), so this emitter passes events through unchanged.
const passThroughRedactor: AuditRedactor = (event) => event;

/**
 * Logs one warning (`IDEMPOTENCY_ASYNC_REPLICA`) when the database could lose a claim it
 * acknowledged (see `replicationRisk` and docs/replication.md). What cannot be read is logged at
 * debug level: the check never stops a start.
 */
async function warnOfReplicationRisk(pool: pg.Pool, logger: Logger): Promise<void> {
  try {
    const facts = await readReplicationFacts(pool);
    const risk = replicationRisk(facts);
    if (!risk) return;
    logger.warn(
      {
        code: ERROR_CODES.asyncReplica,
        reasons: risk.reasons,
        asyncStandbys: risk.asyncStandbys,
        synchronousCommit: facts.synchronousCommit,
        synchronousStandbyNames: facts.synchronousStandbyNames,
      },
      'an acknowledged claim could be lost on failover or crash: lost records become unknown and need an operator (docs/replication.md)',
    );
  } catch (err) {
    logger.debug({ err: errorLabel(err) }, 'replication settings not read');
  }
}

/**
 * Starts the audit writer, the backfill worker and the sweeper (scheduler + worker), and the HTTP
 * server when `config.httpPort` is set. Checks Postgres and Redis first (throws
 * `ServiceUnavailableError`) and that the schema is migrated (throws `NotMigratedError`).
 *
 * @example
 * const proc = await startOperationsProcess(loadConfig());
 * process.once('SIGTERM', async () => process.exit((await proc.close()).clean ? 0 : 1));
 */
export async function startOperationsProcess(
  config: Config,
  options: OperationsProcessOptions = {},
): Promise<OperationsProcess> {
  const logger = options.logger ?? createLogger(config.logLevel);
  const checkMs = options.startCheckTimeoutMs ?? START_CHECK_TIMEOUT_MS;
  const [pgResult, redisResult] = await Promise.allSettled([
    connectPostgres(config.databaseUrl, {
      max: 10,
      timeoutMs: checkMs,
      applicationName: 'bullmq-idempotency-worker',
      onError: (err) => logger.warn({ err: errorLabel(err) }, 'idle Postgres connection lost'),
    }),
    checkRedis(config.redisUrl, checkMs),
  ]);
  if (pgResult.status === 'rejected' || redisResult.status === 'rejected') {
    if (pgResult.status === 'fulfilled') await pgResult.value.end().catch(() => {});
    throw pgResult.status === 'rejected' ? pgResult.reason : (redisResult as PromiseRejectedResult).reason;
  }
  const pool = pgResult.value;

  // Everything opened so far, to force-close if the start fails half-way.
  const opened: ((force: boolean) => Promise<unknown>)[] = [];
  let redis: RedisConnection | undefined;
  let http: OpsHttpServer | undefined;
  try {
    await assertMigrated(pool, config.schema);
    await warnOfReplicationRisk(pool, logger);
    // One URL, or the nodes of a Redis Cluster (a shared ioredis Cluster, closed last).
    redis = await openRedis(config.redisUrl, config.prefix);
    const { connection } = redis;
    const sharedRedis = redis;
    const prefix = config.prefix;
    const queue = (name: string) => {
      const q = openQueue(name, { connection, prefix });
      q.on('error', (err) => logger.error({ queue: name, err: errorLabel(err) }, 'queue error'));
      opened.push(async (force) => (force ? q.disconnect() : q.close()));
      return q;
    };
    const track = <W extends Worker>(w: W): W => {
      opened.push((force) => w.close(force));
      return w;
    };

    if (!config.keyring) {
      logger.warn({}, 'BQI_KEYRING is not set: audit references made here join no others');
    }
    if ((config.operators || config.operatorJwt) && config.httpPort === undefined) {
      logger.warn(
        {},
        'BQI_OPERATORS or BQI_OPERATOR_JWT_* is set but BQI_HTTP_PORT is not: no confirmation endpoint is served',
      );
    }
    if ((options.console ?? config.console) && config.httpPort === undefined) {
      logger.warn({}, 'the console is on but BQI_HTTP_PORT is not set: no console is served');
    }
    if (config.sharedConfirmToken) {
      logger.warn({}, 'BQI_CONFIRM_TOKEN is deprecated: give each operator a token of their own in BQI_OPERATORS');
    }
    const auditPolicy = auditPolicyFor(config.keyring);
    const auditQueue = queue(config.auditQueue);
    const sweeperQueue = queue(DEFAULT_SWEEPER_QUEUE);
    const ledger = new PostgresLedger({
      pool,
      schema: config.schema,
      batching: false,
      preparedStatements: config.preparedStatements,
    });
    const emitter = new AuditEmitter({
      queue: auditQueue,
      pool,
      schema: config.schema,
      redact: passThroughRedactor,
      // Its dead letters keyed as the writer's events are: refs an auditor can match.
      redactionPolicy: auditPolicy,
      actorId: `worker:${hostname()}:${process.pid}`,
      logger,
    });
    const auditWriter = track(
      createAuditWriter({
        connection,
        pool,
        schema: config.schema,
        queueName: config.auditQueue,
        prefix,
        concurrency: config.auditConcurrency,
        redactionPolicy: auditPolicy,
        preparedStatements: config.preparedStatements,
        logger,
      }),
    );
    // Batches that an older writer gave up on (a Postgres outage past its five attempts) go back.
    await redriveFailedAuditBatches(auditQueue, logger).catch((err: Error) =>
      logger.warn({ err: errorLabel(err) }, 'failed audit batches not re-driven: the next backfill will'),
    );
    const backfill = track(
      createBackfillWorker({ connection, prefix, pool, schema: config.schema, auditQueue, logger }),
    );
    const sweeper = track(createSweeperWorker({ connection, ledger, prefix, emitter, logger }));
    // Re-created whenever a check (every sweep interval) finds it gone from Redis.
    const sweepSchedule = new KeptSchedule(sweeperQueue, sweeperSchedule(config.sweepEveryMs), logger);
    opened.push(async () => sweepSchedule.stop());

    const metrics =
      config.httpPort === undefined
        ? undefined
        : new OperationsMetrics({ pool, schema: config.schema, auditQueue, registry: processRegistry(options) });

    // The intent relay: one queue per name of the intents it adds, closed with the process.
    const relayQueue = queue(DEFAULT_RELAY_QUEUE);
    const intentQueues = new Map<string, Queue>();
    const intentQueue = (name: string) =>
      intentQueues.get(name) ?? (intentQueues.set(name, queue(name)).get(name) as Queue);
    const relayOptions = options.relay ?? {};
    // The relay's events name a task: redacted with the process's keyed policy, so the task is a
    // reference that joins the workers' events, never an id in clear.
    const relayEmitter = new AuditEmitter({
      queue: auditQueue,
      pool,
      schema: config.schema,
      redact: auditRedactor(auditPolicy),
      redactionPolicy: auditPolicy,
      actorId: 'intent-relay',
      logger,
    });
    opened.push(async () => relayEmitter.close());
    const relay = new IntentRelay(
      {
        pool,
        schema: config.schema,
        queue: intentQueue,
        emitter: relayEmitter,
        ...(relayOptions.batchSize === undefined ? {} : { batchSize: relayOptions.batchSize }),
        ...(relayOptions.recheckAfterMs === undefined ? {} : { recheckAfterMs: relayOptions.recheckAfterMs }),
      },
      logger,
      metrics ? relayMetrics(metrics.registry) : undefined,
    );
    const relayWorker = track(createRelayWorker({ connection, relay, prefix, logger }));
    const relayEvery = relaySchedule(relayQueue, relayOptions.everyMs ?? DEFAULT_RELAY_EVERY_MS, logger);
    opened.push(async () => relayEvery.stop());
    const listener =
      relayOptions.listen === false
        ? undefined
        : new IntentListener(pool, config.schema, () => void relay.run(), logger);
    opened.push(async () => {
      await listener?.stop();
      await relay.stop();
    });
    // One line per audit batch: counts only (events are never logged).
    auditWriter.on('completed', (_job, r: Partial<WriteBatchResult> & { skipped?: boolean }) => {
      if (r.skipped) return;
      const counts = { inserted: r.inserted ?? 0, duplicates: r.duplicates ?? 0, deadLettered: r.deadLettered ?? 0 };
      metrics?.batchWritten(counts);
      if (counts.deadLettered > 0) logger.warn(counts, 'audit batch dead-lettered');
      else logger.info(counts, 'audit batch written');
    });
    sweeper.on('completed', (_job, r: { deleted: number; batches: number }) => {
      if (r.deleted > 0) logger.info({ ...r }, 'ledger swept');
      else logger.debug({ ...r }, 'ledger swept');
    });
    const workers = { auditWriter, backfill, sweeper, relay: relayWorker };
    for (const [name, w] of [
      ['audit writer', auditWriter],
      ['backfill', backfill],
      ['sweeper', sweeper],
      ['relay', relayWorker],
    ] as const) {
      w.on('failed', (job, err) =>
        logger.warn(
          { worker: name, jobId: job?.id, attemptsMade: job?.attemptsMade, err: errorLabel(err) },
          'job failed',
        ),
      );
    }

    let closing: Promise<{ clean: boolean }> | undefined;
    if (config.httpPort !== undefined) {
      http = new OpsHttpServer({
        logger,
        routes: [
          ...healthRoutes({
            pool,
            pingRedis: () => pingQueues(auditQueue),
            workers,
            schedules: async () => ({
              sweeper: await sweeperScheduled(sweeperQueue),
              relay: await relayScheduled(relayQueue),
            }),
            stopping: () => closing !== undefined,
            ...(options.readyCacheMs === undefined ? {} : { readyCacheMs: options.readyCacheMs }),
          }),
          {
            method: 'GET',
            path: '/metrics',
            handle: async () => {
              const { contentType, body } = await (metrics as OperationsMetrics).render();
              return { status: 200, body, headers: { 'content-type': contentType } };
            },
          },
          ...(options.routes ?? []),
        ],
      });
      // One queue per name, opened on the first answer that wakes (or re-runs) a job of it, closed with the process.
      const queues = new Map<string, Queue>();
      const queueOf = (name: string) => queues.get(name) ?? (queues.set(name, queue(name)).get(name) as Queue);
      if (config.operators || config.operatorJwt) {
        http.mount(
          '/confirmations',
          confirmationHttpHandler({
            pool,
            schema: config.schema,
            ...(config.operators ? { operators: config.operators } : {}),
            ...(config.operatorJwt ? { jwt: config.operatorJwt } : {}),
            policy: auditPolicy,
            logger,
            queue: queueOf,
          }),
        );
      }
      const consoleOn = options.console ?? config.console ?? false;
      if (consoleOn) {
        const own = typeof consoleOn === 'object' ? consoleOn : {};
        http.mount(
          '/console',
          consoleHandler({
            pool,
            schema: config.schema,
            ledger,
            store: new AuditStore(pool, config.schema, auditPolicy),
            policy: auditPolicy,
            keyring: config.keyring,
            queue: queueOf,
            logger,
            operators: config.operators ?? [],
            ...(config.consoleDecrypt ? { decrypt: config.consoleDecrypt } : {}),
            ...own,
          }),
        );
      }
      await http.listen(config.httpPort, config.httpHost).catch((err: unknown) => {
        throw new HttpListenError(config.httpHost, config.httpPort as number, errorLabel(err));
      });
    }
    const server = http;
    // Scheduled once everything has started (the port too): a start that fails leaves nothing in Redis.
    await sweepSchedule.start();
    await relayEvery.start();
    await listener?.start();
    // Intents committed while no relay listened are taken now, not at the first tick.
    void relay.run();

    // Producers of audit events stop first, then the emitter flushes, then the writer.
    const graceful = async () => {
      sweepSchedule.stop();
      relayEvery.stop();
      await listener?.stop();
      await relay.stop();
      await Promise.all([backfill.close(), sweeper.close(), relayWorker.close()]);
      await Promise.all([emitter.close(), relayEmitter.close()]);
      await auditWriter.close();
      await Promise.all([
        auditQueue.close(),
        sweeperQueue.close(),
        relayQueue.close(),
        ...[...intentQueues.values()].map((q) => q.close()),
      ]);
      await server?.close();
      await sharedRedis.close();
      await pool.end();
    };
    const force = async () => {
      await Promise.allSettled(opened.map((close) => close(true)));
      await server?.close();
      await sharedRedis.close(true);
      await pool.end().catch(() => {});
    };

    const close = (opts: { timeoutMs?: number } = {}) => {
      closing ??= (async () => {
        const timeoutMs = opts.timeoutMs ?? config.shutdownTimeoutMs;
        const started = Date.now();
        const outcome = await settleWithin(graceful(), timeoutMs);
        if (outcome === 'done') {
          logger.info({ ms: Date.now() - started }, 'workers closed');
          return { clean: true };
        }
        if (outcome === 'timeout') {
          logger.error({ timeoutMs }, 'shutdown deadline reached, force-closing the workers');
        } else {
          logger.error({ err: errorLabel(outcome.error) }, 'graceful shutdown failed, force-closing the workers');
        }
        await settleWithin(force(), FORCE_CLOSE_MS);
        return { clean: false };
      })();
      return closing;
    };

    logger.info(
      {
        postgres: describeUrl(config.databaseUrl),
        redis: describeRedisUrl(config.redisUrl),
        schema: config.schema,
        prefix,
        queues: {
          audit: config.auditQueue,
          backfill: DEFAULT_BACKFILL_QUEUE,
          sweeper: DEFAULT_SWEEPER_QUEUE,
          relay: DEFAULT_RELAY_QUEUE,
        },
        sweepEveryMs: config.sweepEveryMs,
        relayEveryMs: relayOptions.everyMs ?? DEFAULT_RELAY_EVERY_MS,
        intentListener: listener ? 'listening' : 'off',
        confirmations: server && (config.operators || config.operatorJwt) ? 'served at /confirmations' : 'off',
        console: server && (options.console ?? config.console) ? 'served at /console' : 'off',
        ...(server?.address ? { http: { host: server.address.address, port: server.address.port } } : {}),
      },
      'started',
    );
    return { close, workers, schedules: { sweeper: sweepSchedule, relay: relayEvery }, relay, http: server, logger };
  } catch (err) {
    await settleWithin(Promise.allSettled(opened.map((close) => close(true))), FORCE_CLOSE_MS);
    await http?.close();
    await redis?.close(true);
    await pool.end().catch(() => {});
    throw err;
  }
}

/**
 * One cheap read of the queues' store for `/readyz`: the audit queue's wait list on Redis; its
 * count of waiting jobs (one query) on BullMQ's PostgreSQL backend.
 */
async function pingQueues(queue: Queue): Promise<unknown> {
  const client = await (queue.backend as { client?: Promise<{ llen(key: string): Promise<number> }> }).client;
  return client ? client.llen(queue.toKey('wait')) : queue.getJobCountByTypes('waiting');
}
