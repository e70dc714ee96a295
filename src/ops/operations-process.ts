import { hostname } from 'node:os';
import type { Queue, Worker } from 'bullmq';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import type { WriteBatchResult } from '../audit/audit-store.js';
import { AuditEmitter, type AuditRedactor } from '../audit/emitter.js';
import { auditRedactor } from '../audit/redact-event.js';
import { redriveFailedAuditBatches } from '../audit/redrive-failed.js';
import type { AuditRedaction } from '../config/audit-policy.js';
import { type Config, describeUrl } from '../config/env.js';
import { configuredAuditPolicy } from '../config/redaction-module.js';
import { describeRedisUrl } from '../config/redis-url.js';
import { openRedis, type RedisConnection } from '../config/services.js';
import type { ConsoleOptions } from '../console/console-handler.js';
import { errorLabel } from '../errors/clean-name.js';
import { ERROR_CODES, IdempotencyError } from '../errors/idempotency-error.js';
import { IntentListener } from '../intents/listener.js';
import { createBackfillWorker, DEFAULT_BACKFILL_QUEUE } from '../jobs/audit-backfill.js';
import { createAuditWriter } from '../jobs/audit-writer.js';
import { createSweeperWorker, DEFAULT_SWEEPER_QUEUE, sweeperSchedule } from '../jobs/ledger-sweeper.js';
import { PostgresLedger } from '../ledger/postgres-ledger.js';
import { OperationsMetrics } from '../observability/operations-metrics.js';
import { KeptSchedule } from '../shared/kept-schedule.js';
import { openQueue } from '../shared/queue-backend.js';
import type { HttpRoute, OpsHttpServer } from './http-server.js';
import { IntentRelay } from './intent-relay.js';
import {
  createRelayWorker,
  DEFAULT_RELAY_EVERY_MS,
  DEFAULT_RELAY_QUEUE,
  relayMetrics,
  relaySchedule,
} from './intent-relay-worker.js';
import { createLogger } from './logger.js';
import { assertMigrated } from './not-migrated.js';
import { opsHttpServer, processRegistry } from './ops-http.js';
import { settleWithin } from './settle.js';
import { connectServices, warnOfConfiguration, warnOfReplicationRisk } from './start-checks.js';

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
  /**
   * The trail's redaction rules, as the workers' runtime takes them (`audit.redaction`): their
   * input without `hmacKeys`, or a compiled policy keyed from `config.keyring`, which they need.
   * The writer redacts by them what no emitter did, the relay's events are redacted by them, and
   * the batches of workers that hold the same rules are stored without a second pass
   * (docs/audit.md#one-policy-in-every-process). @defaultValue the rules of `config.redactionModule`
   * (`BQI_REDACTION`), else the built-in ones
   */
  redaction?: AuditRedaction;
};

// The emitter here carries only the sweeper's summary events (counts, no payloads). The
// redaction policy is applied where events are created (the wrapper, with the operation's
// policy), so this emitter passes events through unchanged.
const passThroughRedactor: AuditRedactor = (event) => event;

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
  // Loaded before any connection: rules that cannot be used stop the start as bad configuration.
  const auditPolicy = await configuredAuditPolicy(config, options.redaction);
  const pool = await connectServices(config, checkMs, logger);

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

    warnOfConfiguration(config, Boolean(options.console ?? config.console), logger);
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
        : new OperationsMetrics({
            pool,
            schema: config.schema,
            auditQueue,
            registry: processRegistry(options.registry),
          });

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
    auditWriter.on('completed', (_job, r: Partial<WriteBatchResult> & { skipped?: boolean; tagHeld?: boolean }) => {
      if (r.skipped) return;
      const counts = { inserted: r.inserted ?? 0, duplicates: r.duplicates ?? 0, deadLettered: r.deadLettered ?? 0 };
      metrics?.batchWritten(counts);
      // tagHeld: stored without the second redaction pass (its emitter's rules are this process's).
      const line = { ...counts, tagHeld: r.tagHeld === true };
      if (counts.deadLettered > 0) logger.warn(line, 'audit batch dead-lettered');
      else logger.info(line, 'audit batch written');
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
      http = opsHttpServer({
        config,
        logger,
        pool,
        ledger,
        auditPolicy,
        auditQueue,
        sweeperQueue,
        relayQueue,
        workers,
        metrics: metrics as OperationsMetrics,
        queue,
        stopping: () => closing !== undefined,
        readyCacheMs: options.readyCacheMs,
        routes: options.routes ?? [],
        console: options.console ?? config.console ?? false,
      });
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
        // Which rules the writer and the relay redact by: the workers' batches held to others are redacted twice.
        redaction: {
          version: auditPolicy.version,
          rules: options.redaction ? 'option' : (config.redactionModule ?? 'built-in'),
        },
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
