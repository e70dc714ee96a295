import { type Env, loadCliConfig } from '../config/env.js';
import { ConfigError } from '../config/errors.js';
import type { IdempotencyOptions } from './options.js';

/**
 * The runtime's options from the variables the operations process (`bullmq-idempotency start`)
 * and the CLI read: `DATABASE_URL`, `REDIS_URL`, `BQI_KEYRING`, and `BQI_SCHEMA`, `BQI_PREFIX`,
 * `BQI_AUDIT_QUEUE`, `BQI_PREPARED_STATEMENTS` with their defaults. A deployment then configures
 * schema, prefix and keyring once, and the application's workers, the operations process and the
 * operator's CLI all find the same tables, the same queues and the same references.
 *
 * @throws ConfigError (`IDEMPOTENCY_ENV_CONFIG`) naming every variable that is missing or bad
 * @example
 * const idem = createIdempotency({ ...idempotencyOptionsFromEnv(), audit: { writer: true } });
 */
export function idempotencyOptionsFromEnv(env: Env = process.env): IdempotencyOptions {
  const c = loadCliConfig(env);
  const missing = [
    c.databaseUrl
      ? undefined
      : { variable: 'DATABASE_URL', message: 'is required (postgres://user:password@host:5432/db)' },
    c.redisUrl ? undefined : { variable: 'REDIS_URL', message: 'is required (redis://host:6379)' },
    c.keyring ? undefined : { variable: 'BQI_KEYRING', message: 'is required (id:base64:…, the current key first)' },
  ].filter((m) => m !== undefined);
  if (missing.length > 0) throw new ConfigError(missing);
  return {
    postgres: c.databaseUrl as string,
    redis: c.redisUrl as string,
    keyring: c.keyring as NonNullable<typeof c.keyring>,
    schema: c.schema,
    prefix: c.prefix,
    preparedStatements: c.preparedStatements,
    audit: { queue: c.auditQueue },
  };
}
