import type pg from 'pg';
import { checkSchema, DEFAULT_SCHEMA } from '../db/connection.js';
import { IdempotencyConfigError } from '../errors/errors.js';
import { DEFAULT_AUDIT_QUEUE } from '../jobs/audit-writer.js';
import type { RedactionPolicy } from '../redaction/define-policy.js';
import { type Keyring, parseKeyringSpec } from '../sealing/keyring.js';
import type { Logger } from '../shared/logger.js';
import { runtimeAuditPolicy } from './audit-policy.js';
import { runtimeLogger, SILENT_LOGGER } from './default-logger.js';
import { DEFAULT_PREFIX, type IdempotencyOptions, type IdempotencyRelayOptions } from './options.js';
import { type QueueConnection, queueConnection } from './queue-connection.js';
import { checkQueueName } from './queues.js';

/**
 * `createIdempotency`'s options checked and given their defaults, before the runtime builds
 * anything: a refused configuration leaves nothing open. Apart from the runtime so the order of
 * the checks (which option a configuration with several faults is refused for) reads in one
 * place, and an option added to `IdempotencyOptions` passes through here, resolved once, to the
 * part that uses it.
 */

/** The audit emitter's settings (`audit`), when the runtime has a trail. */
export type RuntimeAuditSettings = { queue: string; maxBatch?: number; maxDelayMs?: number };

export type ResolvedOptions = {
  schema: string;
  prefix: string;
  keyring: Keyring;
  auditPolicy: RedactionPolicy;
  postgres: string | pg.Pool;
  redis: QueueConnection;
  logger: Logger;
  logErrorText: boolean;
  owner: string | undefined;
  observer: IdempotencyOptions['observer'];
  audit: RuntimeAuditSettings | undefined;
  /** The writer's settings when this process writes the trail too (`audit.writer`). */
  writer: { concurrency?: number } | undefined;
  /** Given to every part that prepares statements, when the option is set. */
  prepared: { preparedStatements?: boolean };
  poolSize: number | undefined;
  durableByDefault: boolean;
  /** The in-process relay's options (`intents.relay`), when it runs here. */
  relay: IdempotencyRelayOptions | undefined;
};

/** Checks `options` in a fixed order; throws `IDEMPOTENCY_CONFIG` naming the first option refused. */
export function resolveOptions(options: IdempotencyOptions): ResolvedOptions {
  if (typeof options !== 'object' || options === null) {
    throw new IdempotencyConfigError('createIdempotency needs its options', { option: 'options' });
  }
  const schema = checkSchema(options.schema ?? DEFAULT_SCHEMA);
  const prefix = checkPrefix(options.prefix ?? DEFAULT_PREFIX);
  const keyring = resolveKeyring(options.keyring);
  const audit = options.audit === false ? undefined : (options.audit ?? {});
  const auditPolicy = runtimeAuditPolicy(keyring, audit?.redaction, options.valueScanner);
  const postgres = checkPostgres(options.postgres);
  const redis = queueConnection(options.redis, prefix);
  const logger = runtimeLogger(options.logger, options.valueScanner);
  const relay = options.intents?.relay;
  return {
    schema,
    prefix,
    keyring,
    auditPolicy,
    postgres,
    redis,
    logger,
    logErrorText: options.logErrorText ?? (options.logger === undefined && logger !== SILENT_LOGGER),
    owner: options.owner,
    observer: options.observer,
    audit: audit && {
      queue: checkQueueName(audit.queue ?? DEFAULT_AUDIT_QUEUE),
      ...(audit.maxBatch === undefined ? {} : { maxBatch: audit.maxBatch }),
      ...(audit.maxDelayMs === undefined ? {} : { maxDelayMs: audit.maxDelayMs }),
    },
    writer: audit?.writer
      ? audit.writerConcurrency === undefined
        ? {}
        : { concurrency: audit.writerConcurrency }
      : undefined,
    prepared: options.preparedStatements === undefined ? {} : { preparedStatements: options.preparedStatements },
    poolSize: options.poolSize,
    durableByDefault: options.intents?.durable === true,
    relay: relay ? (relay === true ? {} : relay) : undefined,
  };
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
