/**
 * The worker process (`npm start`): the audit writer, the audit backfill worker and the ledger
 * sweeper in one process, configured from the environment (see src/config/env.ts), logging JSON
 * to stdout with pino.
 *
 * Exit codes: 0 clean shutdown; 1 shutdown deadline passed (workers force-closed) or any other
 * failure; 2 bad configuration; 3 Postgres or Redis unreachable at start.
 */
import { realpathSync } from 'node:fs';
import { hostname } from 'node:os';
import { fileURLToPath } from 'node:url';
import { Queue, type Worker } from 'bullmq';
import type pg from 'pg';
import { type Logger, pino } from 'pino';
import { AuditEmitter, type AuditRedactor } from '../src/audit/emitter.js';
import { redriveFailedAuditBatches } from '../src/audit/redrive-failed.js';
import { auditPolicyFor } from '../src/config/audit-policy.js';
import { type Config, ConfigError, describeUrl, type LogLevel, loadConfig } from '../src/config/env.js';
import { describeRedisUrl } from '../src/config/redis-url.js';
import {
  checkRedis,
  connectPostgres,
  openRedis,
  type RedisConnection,
  ServiceUnavailableError,
} from '../src/config/services.js';
import { errorLabel } from '../src/errors/clean-name.js';
import { createBackfillWorker, DEFAULT_BACKFILL_QUEUE } from '../src/jobs/audit-backfill.js';
import { createAuditWriter } from '../src/jobs/audit-writer.js';
import { createSweeperWorker, DEFAULT_SWEEPER_QUEUE, scheduleLedgerSweeper } from '../src/jobs/ledger-sweeper.js';
import { PostgresLedger } from '../src/ledger/postgres-ledger.js';
import { DEFAULT_REDACTION_POLICY, pinoRedactionOptions } from '../src/redaction/index.js';

/** Exit codes of the worker process. */
export const EXIT = { ok: 0, failure: 1, config: 2, unreachable: 3 } as const;

/** Time allowed, after the deadline, for force-closing before the process gives up waiting. */
const FORCE_CLOSE_MS = 2_000;

/** Signals this soon after the first one are taken as its duplicates. */
const DUPLICATE_SIGNAL_MS = 1_000;

/** Timeout of the start-up reachability checks of Postgres and Redis. */
const START_CHECK_TIMEOUT_MS = 5_000;

export type WorkerProcess = {
  /**
   * Stops the workers: active jobs may finish within `timeoutMs` (default
   * `BQI_SHUTDOWN_TIMEOUT_MS`); after it, workers are force-closed and `clean` is false.
   * Idempotent: later calls return the first call's promise.
   */
  close(options?: { timeoutMs?: number }): Promise<{ clean: boolean }>;
  readonly workers: { auditWriter: Worker; backfill: Worker; sweeper: Worker };
  readonly logger: Logger;
};

/** The schema has not been migrated: the writer would fail on every batch. */
export class NotMigratedError extends Error {
  constructor(schema: string, missing: string[]) {
    super(
      `schema ${schema} is missing ${missing.join(', ')}: run \`bullmq-idempotency migrate\` (or npm run migrate) first`,
    );
    this.name = 'NotMigratedError';
  }
}

/** JSON logs to stdout, redacted by the default policy; synchronous so nothing is lost on exit. */
export function createLogger(level: LogLevel = 'info'): Logger {
  return pino(
    { name: 'bullmq-idempotency', level, ...pinoRedactionOptions(DEFAULT_REDACTION_POLICY) },
    pino.destination({ dest: 1, sync: true }),
  );
}

// The emitter here carries only the sweeper's summary events (counts, no payloads). The
// redaction policy is applied where events are created (the wrapper, with the operation's
// policy), so this emitter passes events through unchanged.
const passThroughRedactor: AuditRedactor = (event) => event;

/**
 * Starts the audit writer, the backfill worker and the sweeper (scheduler + worker). Checks
 * Postgres and Redis first (throws {@link ServiceUnavailableError}) and that the schema is
 * migrated (throws {@link NotMigratedError}).
 *
 * @example
 * const proc = await startWorkerProcess(loadConfig());
 * process.once('SIGTERM', async () => process.exit((await proc.close()).clean ? 0 : 1));
 */
export async function startWorkerProcess(
  config: Config,
  options: { logger?: Logger; startCheckTimeoutMs?: number } = {},
): Promise<WorkerProcess> {
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
  try {
    await assertMigrated(pool, config.schema);
    // One URL, or the nodes of a Redis Cluster (a shared ioredis Cluster, closed last).
    redis = await openRedis(config.redisUrl);
    const { connection } = redis;
    const sharedRedis = redis;
    const prefix = config.prefix;
    const queue = (name: string) => {
      const q = new Queue(name, { connection, prefix });
      q.on('error', (err) => logger.error({ queue: name, err: err.message }, 'queue error'));
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
    await scheduleLedgerSweeper(sweeperQueue, config.sweepEveryMs);
    const sweeper = track(createSweeperWorker({ connection, ledger, prefix, emitter, logger }));

    sweeper.on('completed', (_job, r: { deleted: number; batches: number }) => {
      if (r.deleted > 0) logger.info({ ...r }, 'ledger swept');
      else logger.debug({ ...r }, 'ledger swept');
    });
    for (const [name, w] of [
      ['audit writer', auditWriter],
      ['backfill', backfill],
      ['sweeper', sweeper],
    ] as const) {
      w.on('failed', (job, err) =>
        logger.warn(
          { worker: name, jobId: job?.id, attemptsMade: job?.attemptsMade, err: errorLabel(err) },
          'job failed',
        ),
      );
    }

    // Producers of audit events stop first, then the emitter flushes, then the writer.
    const graceful = async () => {
      await Promise.all([backfill.close(), sweeper.close()]);
      await emitter.close();
      await auditWriter.close();
      await Promise.all([auditQueue.close(), sweeperQueue.close()]);
      await sharedRedis.close();
      await pool.end();
    };
    const force = async () => {
      await Promise.allSettled(opened.map((close) => close(true)));
      await sharedRedis.close(true);
      await pool.end().catch(() => {});
    };

    let closing: Promise<{ clean: boolean }> | undefined;
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
          logger.error({ err: outcome.error.message }, 'graceful shutdown failed, force-closing the workers');
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
        queues: { audit: config.auditQueue, backfill: DEFAULT_BACKFILL_QUEUE, sweeper: DEFAULT_SWEEPER_QUEUE },
        sweepEveryMs: config.sweepEveryMs,
      },
      'started',
    );
    return { close, workers: { auditWriter, backfill, sweeper }, logger };
  } catch (err) {
    await settleWithin(Promise.allSettled(opened.map((close) => close(true))), FORCE_CLOSE_MS);
    await redis?.close(true);
    await pool.end().catch(() => {});
    throw err;
  }
}

async function assertMigrated(pool: pg.Pool, schema: string): Promise<void> {
  const tables = ['idempotency_ledger', 'audit_events', 'audit_outbox', 'audit_backfill_checkpoint'];
  const res = await pool.query<{ name: string; found: string | null }>(
    'select t as name, to_regclass($1 || $2 || t)::text as found from unnest($3::text[]) as t',
    [schema, '.', tables],
  );
  const missing = res.rows.filter((r) => r.found === null).map((r) => r.name);
  if (missing.length > 0) throw new NotMigratedError(schema, missing);
}

async function settleWithin(p: Promise<unknown>, ms: number): Promise<'done' | 'timeout' | { error: Error }> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      p.then(
        () => 'done' as const,
        (err: unknown) => ({ error: err instanceof Error ? err : new Error(String(err)) }),
      ),
      new Promise<'timeout'>((resolve) => {
        timer = setTimeout(() => resolve('timeout'), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** The process entry point: configuration, start, signals, exit codes. */
async function main(): Promise<void> {
  let config: Config;
  try {
    config = loadConfig();
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    createLogger().fatal({ variables: err.variables }, err.message);
    process.stderr.write(`${err.message}\n`);
    process.exit(EXIT.config);
  }
  const logger = createLogger(config.logLevel);
  let proc: WorkerProcess | undefined;
  let stopSignal: string | undefined;
  let stopAt = 0;

  const stop = async (reason: string, code: number = EXIT.ok) => {
    if (stopSignal) {
      // One keypress can deliver a signal twice (the terminal's process group, and npm/tsx
      // relaying it): only a signal well after the first one means "stop now".
      if (Date.now() - stopAt < DUPLICATE_SIGNAL_MS) return;
      logger.warn({ signal: reason }, 'second signal during shutdown: exiting now');
      process.exit(EXIT.failure);
    }
    stopSignal = reason;
    stopAt = Date.now();
    if (!proc) return; // still starting: stopped as soon as the start finishes
    logger.info({ signal: reason, timeoutMs: config.shutdownTimeoutMs }, 'shutting down');
    const { clean } = await proc.close();
    const exitCode = clean ? code : EXIT.failure;
    logger.info({ exitCode }, clean ? 'stopped' : 'stopped after force-closing');
    process.exit(exitCode);
  };
  process.on('SIGTERM', () => void stop('SIGTERM'));
  process.on('SIGINT', () => void stop('SIGINT'));
  process.on('unhandledRejection', (err) => {
    logger.fatal({ err }, 'unhandled rejection');
    void stop('unhandledRejection', EXIT.failure);
  });
  process.on('uncaughtException', (err) => {
    logger.fatal({ err }, 'uncaught exception');
    void stop('uncaughtException', EXIT.failure);
  });

  try {
    proc = await startWorkerProcess(config, { logger });
  } catch (err) {
    if (err instanceof ServiceUnavailableError) {
      logger.fatal({ service: err.service, target: err.target, reason: err.reason }, err.message);
      process.stderr.write(`${err.message}\n`);
      process.exit(EXIT.unreachable);
    }
    logger.fatal({ err }, `start failed: ${(err as Error).message}`);
    process.stderr.write(`start failed: ${(err as Error).message}\n`);
    process.exit(EXIT.failure);
  }
  if (stopSignal) {
    const pending = stopSignal;
    stopSignal = undefined;
    await stop(pending);
  }
}

function isEntryPoint(): boolean {
  const entry = process.argv[1];
  if (!entry) return false;
  try {
    return realpathSync(entry) === realpathSync(fileURLToPath(import.meta.url));
  } catch {
    return false;
  }
}

if (isEntryPoint()) await main();
