import type pg from 'pg';
import type { Logger } from 'pino';
import type { Config } from '../config/env.js';
import { checkRedis, connectPostgres } from '../config/services.js';
import { errorLabel } from '../errors/clean-name.js';
import { ERROR_CODES } from '../errors/idempotency-error.js';
import { readReplicationFacts, replicationRisk } from '../ledger/replication-check.js';

/**
 * What the operations process checks and warns of before it opens anything: both services
 * reachable, settings that serve nothing or are deprecated, a database that could lose an
 * acknowledged claim. Apart from the start itself (operations-process.ts), which builds and wires
 * the workers: these only read the configuration and the services, and stop no start but the
 * first.
 */

/**
 * The pool, once Postgres and Redis both answered within `timeoutMs`; else the first failure
 * (`ServiceUnavailableError`), the pool ended.
 */
export async function connectServices(config: Config, timeoutMs: number, logger: Logger): Promise<pg.Pool> {
  const [pgResult, redisResult] = await Promise.allSettled([
    connectPostgres(config.databaseUrl, {
      max: 10,
      timeoutMs,
      applicationName: 'bullmq-idempotency-worker',
      onError: (err) => logger.warn({ err: errorLabel(err) }, 'idle Postgres connection lost'),
    }),
    checkRedis(config.redisUrl, timeoutMs),
  ]);
  if (pgResult.status === 'rejected' || redisResult.status === 'rejected') {
    if (pgResult.status === 'fulfilled') await pgResult.value.end().catch(() => {});
    throw pgResult.status === 'rejected' ? pgResult.reason : (redisResult as PromiseRejectedResult).reason;
  }
  return pgResult.value;
}

/** One warning per setting that serves nothing as configured, or is deprecated. */
export function warnOfConfiguration(config: Config, consoleOn: boolean, logger: Logger): void {
  if (!config.keyring) {
    logger.warn({}, 'BQI_KEYRING is not set: audit references made here join no others');
  }
  if ((config.operators || config.operatorJwt) && config.httpPort === undefined) {
    logger.warn(
      {},
      'BQI_OPERATORS or BQI_OPERATOR_JWT_* is set but BQI_HTTP_PORT is not: no confirmation endpoint is served',
    );
  }
  if (consoleOn && config.httpPort === undefined) {
    logger.warn({}, 'the console is on but BQI_HTTP_PORT is not set: no console is served');
  }
  if (config.sharedConfirmToken) {
    logger.warn({}, 'BQI_CONFIRM_TOKEN is deprecated: give each operator a token of their own in BQI_OPERATORS');
  }
}

/**
 * Logs one warning (`IDEMPOTENCY_ASYNC_REPLICA`) when the database could lose a claim it
 * acknowledged (see `replicationRisk` and docs/replication.md). What cannot be read is logged at
 * debug level: the check never stops a start.
 */
export async function warnOfReplicationRisk(pool: pg.Pool, logger: Logger): Promise<void> {
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
