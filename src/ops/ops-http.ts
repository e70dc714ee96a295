import type { Queue, Worker } from 'bullmq';
import type pg from 'pg';
import type { Logger } from 'pino';
import { collectDefaultMetrics, Registry } from 'prom-client';
import { AuditStore } from '../audit/audit-store.js';
import type { Config } from '../config/env.js';
import { confirmationHttpHandler } from '../confirm/http-handler.js';
import { type ConsoleOptions, consoleHandler } from '../console/console-handler.js';
import { sweeperScheduled } from '../jobs/ledger-sweeper.js';
import type { PostgresLedger } from '../ledger/postgres-ledger.js';
import type { OperationsMetrics } from '../observability/operations-metrics.js';
import type { RedactionPolicy } from '../redaction/define-policy.js';
import { queueRedis } from '../shared/bullmq.js';
import { healthRoutes } from './health-routes.js';
import { type HttpRoute, OpsHttpServer } from './http-server.js';
import { relayScheduled } from './intent-relay-worker.js';

/**
 * The operations process's HTTP server: health and readiness, `/metrics`, and when configured
 * `/confirmations` and the console, each given the process's pool, policy and queues. Apart from
 * the start (operations-process.ts) because what is served is one decision, made from the
 * configuration alone, and the start only listens and closes.
 */

/** The registry of `/metrics`, with Node's default metrics (once per registry). */
export function processRegistry(registry: Registry | undefined): Registry {
  const own = registry ?? new Registry();
  if (!own.getSingleMetric('process_cpu_seconds_total')) collectDefaultMetrics({ register: own });
  return own;
}

/** What the server's routes use of the process. */
export type OpsHttpParts = {
  config: Config;
  logger: Logger;
  pool: pg.Pool;
  ledger: PostgresLedger;
  auditPolicy: RedactionPolicy;
  auditQueue: Queue;
  sweeperQueue: Queue;
  relayQueue: Queue;
  workers: Record<string, Worker>;
  metrics: OperationsMetrics;
  /** Opens a queue closed with the process. */
  queue: (name: string) => Queue;
  stopping: () => boolean;
  readyCacheMs: number | undefined;
  routes: HttpRoute[];
  console: boolean | Pick<ConsoleOptions, 'decrypt' | 'operations' | 'origins' | 'sessionIdleMs'>;
};

/** The server with every route it serves mounted; not listening yet. */
export function opsHttpServer(p: OpsHttpParts): OpsHttpServer {
  const { config, logger, pool } = p;
  const http = new OpsHttpServer({
    logger,
    routes: [
      ...healthRoutes({
        pool,
        pingRedis: () => pingQueues(p.auditQueue),
        workers: p.workers,
        schedules: async () => ({
          sweeper: await sweeperScheduled(p.sweeperQueue),
          relay: await relayScheduled(p.relayQueue),
        }),
        stopping: p.stopping,
        ...(p.readyCacheMs === undefined ? {} : { readyCacheMs: p.readyCacheMs }),
      }),
      {
        method: 'GET',
        path: '/metrics',
        handle: async () => {
          const { contentType, body } = await p.metrics.render();
          return { status: 200, body, headers: { 'content-type': contentType } };
        },
      },
      ...p.routes,
    ],
  });
  // One queue per name, opened on the first answer that wakes (or re-runs) a job of it, closed with the process.
  const queues = new Map<string, Queue>();
  const queueOf = (name: string) => queues.get(name) ?? (queues.set(name, p.queue(name)).get(name) as Queue);
  if (config.operators || config.operatorJwt) {
    http.mount(
      '/confirmations',
      confirmationHttpHandler({
        pool,
        schema: config.schema,
        ...(config.operators ? { operators: config.operators } : {}),
        ...(config.operatorJwt ? { jwt: config.operatorJwt } : {}),
        policy: p.auditPolicy,
        logger,
        queue: queueOf,
      }),
    );
  }
  if (p.console) {
    const own = typeof p.console === 'object' ? p.console : {};
    http.mount(
      '/console',
      consoleHandler({
        pool,
        schema: config.schema,
        ledger: p.ledger,
        store: new AuditStore(pool, config.schema, p.auditPolicy, { preparedStatements: config.preparedStatements }),
        policy: p.auditPolicy,
        keyring: config.keyring,
        queue: queueOf,
        logger,
        operators: config.operators ?? [],
        ...(config.consoleDecrypt ? { decrypt: config.consoleDecrypt } : {}),
        ...own,
      }),
    );
  }
  return http;
}

/**
 * One cheap read of the queues' store for `/readyz`: the audit queue's wait list on Redis; its
 * count of waiting jobs (one query) on BullMQ's PostgreSQL backend.
 */
async function pingQueues(queue: Queue): Promise<unknown> {
  const client = await queueRedis(queue);
  return client ? client.llen(queue.toKey('wait')) : queue.getJobCountByTypes('waiting');
}
