import { z } from 'zod';
import type { Keyring } from '../sealing/keyring.js';
import type { OperatorJwtOptions } from '../shared/operator-jwt.js';
import type { Operator } from '../shared/operators.js';
import { fields, keyringSpec, type LogLevel } from './env-variables.js';
import { ConfigError } from './errors.js';
import { confirmOperators, operatorJwtOf } from './operators-env.js';
import { hasHashTag, parseRedisUrl } from './redis-url.js';

export { ConfigError, describeUrl } from './errors.js';

/**
 * Configuration of the operations process (`bullmq-idempotency start`) and the CLI, read from the environment or the command line.
 * Unset and empty variables take their defaults; every error names its variable.
 */
export type Config = {
  /** `DATABASE_URL`: the Postgres holding the ledger and the audit trail. */
  databaseUrl: string;
  /**
   * `REDIS_URL`: the Redis of the BullMQ queues: `redis://host:6379` (or `rediss://`), or the
   * nodes of a Redis Cluster, `redis+cluster://host:7000,host:7001` or `redis://host:7000,redis://host:7001`
   * (see `parseRedisUrl`). On a cluster, `BQI_PREFIX` must hold a hash tag (`{bull}`).
   */
  redisUrl: string;
  /** `BQI_SCHEMA`: Postgres schema of the library's tables. @defaultValue `'public'` */
  schema: string;
  /** `BQI_PREFIX`: BullMQ key prefix. @defaultValue `'bull'` */
  prefix: string;
  /** `BQI_AUDIT_QUEUE`: the queue the audit writer consumes. @defaultValue `'bullmq-idempotency-audit'` */
  auditQueue: string;
  /** `BQI_AUDIT_CONCURRENCY`: audit batches the writer inserts at once. @defaultValue 4 */
  auditConcurrency: number;
  /** `BQI_SWEEP_EVERY_MS`: period of the ledger sweeper, milliseconds or `'1m'`. @defaultValue 60000 */
  sweepEveryMs: number;
  /** `BQI_SHUTDOWN_TIMEOUT_MS`: how long a graceful shutdown may take, milliseconds or `'10s'`. @defaultValue 10000 */
  shutdownTimeoutMs: number;
  /**
   * `BQI_HTTP_PORT`: serve `/healthz`, `/readyz` and `/metrics` on this port (0: any free port,
   * logged at start). Unset: no HTTP server.
   */
  httpPort?: number;
  /**
   * `BQI_HTTP_HOST`: the address the HTTP server listens on. Loopback by default: set `0.0.0.0`
   * (all interfaces) or the address of one to serve probes and confirmations to other machines.
   * @defaultValue `'127.0.0.1'`
   */
  httpHost: string;
  /**
   * `BQI_OPERATORS`: serve `/confirmations` (list and answer confirmation requests) on the HTTP
   * server, to these operators, each by its own token: entries separated by white space, each
   * `actor=<id>;namespaces=<ns>[,<ns>…];sha256=<SHA-256 of the token, hex>` (see
   * `parseOperators`; `bullmq-idempotency operators token` makes one). The deprecated
   * `BQI_CONFIRM_TOKEN` (at least 32 characters) with `BQI_CONFIRM_ACTOR` adds one operator of
   * every namespace. Unset: no confirmation endpoint.
   */
  operators?: Operator[];
  /**
   * Operators identified by JWTs of an identity provider, beside (or instead of) `BQI_OPERATORS`:
   * `BQI_OPERATOR_JWT_ISSUER` and `BQI_OPERATOR_JWT_AUDIENCE` (each one or more, comma-separated),
   * one of `BQI_OPERATOR_JWKS_URL`, `BQI_OPERATOR_JWKS` (a JWKS as JSON) and
   * `BQI_OPERATOR_JWT_PUBLIC_KEY` (PEM), and optionally `BQI_OPERATOR_JWT_ACTOR_CLAIM` (`sub`),
   * `BQI_OPERATOR_JWT_NAMESPACES_CLAIM` (`bqi_namespaces`), `BQI_OPERATOR_JWT_NAMESPACE_PREFIX`,
   * `BQI_OPERATOR_JWT_ALGORITHMS` (comma-separated). See docs/operators.md.
   */
  operatorJwt?: OperatorJwtOptions;
  /** True when the operators include the deprecated shared `BQI_CONFIRM_TOKEN` (a warning at start). */
  sharedConfirmToken?: boolean;
  /**
   * `BQI_CONSOLE=on`: serve the operator console at `/console` on the HTTP server, to the operators
   * of `BQI_OPERATORS` (docs/console.md). Off unless set.
   */
  console?: boolean;
  /**
   * `BQI_CONSOLE_DECRYPT`: the operators (actors of `BQI_OPERATORS`, comma-separated) who may open
   * sealed values in the console, each opening audited with its reason. Unset: nobody.
   */
  consoleDecrypt?: string[];
  /**
   * `BQI_PREPARED_STATEMENTS`: `false` runs every statement unnamed, for a pooler in transaction
   * mode (pgbouncer < 1.21, RDS Proxy, Supavisor) between this process and Postgres.
   * @defaultValue true
   */
  preparedStatements: boolean;
  /** `LOG_LEVEL`: pino level. @defaultValue `'info'` */
  logLevel: LogLevel;
  /**
   * `BQI_KEYRING`: the workers' keyring. Its ref keys make the references the audit writer puts in
   * place of fields that fail their grammar, so they match the workers' own. Without it, a random
   * per-process key is used: still safe, but those references join nothing.
   */
  keyring?: Keyring;
  /**
   * `BQI_REDACTION`: a module (`.js`, `.mjs`, `.cjs`) or `.json` file, relative to the working
   * directory, whose `redaction` or default export is the trail's redaction policy, as the
   * runtime's `audit.redaction` takes it (docs/audit.md#one-policy-in-every-process). Needs
   * `BQI_KEYRING`. Unset: the built-in rules.
   */
  redactionModule?: string;
};

/** What the CLI reads: the URLs are required only by the commands that use them. */
export type CliConfig = Pick<Config, 'schema' | 'prefix' | 'auditQueue' | 'preparedStatements' | 'redactionModule'> & {
  databaseUrl?: string;
  redisUrl?: string;
  /**
   * `BQI_KEYRING`: the keys that open sealed results and error text (`inspect --decrypt`) and
   * seal an operator's result (`resolve --committed`), in the form of `parseKeyringSpec`:
   * `k2:base64:…,k1:base64:…`, the current key first. Unset: sealed values stay sealed.
   */
  keyring?: Keyring;
};

const workerSchema = z.object({
  ...fields,
  BQI_KEYRING: keyringSpec.optional(),
  DATABASE_URL: fields.DATABASE_URL.optional(),
  REDIS_URL: fields.REDIS_URL.optional(),
});

const cliSchema = z.object({
  DATABASE_URL: fields.DATABASE_URL.optional(),
  REDIS_URL: fields.REDIS_URL.optional(),
  BQI_SCHEMA: fields.BQI_SCHEMA,
  BQI_PREFIX: fields.BQI_PREFIX,
  BQI_AUDIT_QUEUE: fields.BQI_AUDIT_QUEUE,
  BQI_PREPARED_STATEMENTS: fields.BQI_PREPARED_STATEMENTS,
  BQI_KEYRING: keyringSpec.optional(),
  BQI_REDACTION: fields.BQI_REDACTION,
});

export type Env = Record<string, string | undefined>;

const REQUIRED_HINT: Record<string, string> = {
  DATABASE_URL: 'is required (e.g. postgres://user:password@host:5432/db)',
  REDIS_URL: 'is required (e.g. redis://host:6379)',
};

/** Only the variables the schema knows, with empty strings treated as unset. */
function pickEnv(env: Env, keys: string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const k of keys) {
    const v = env[k]?.trim();
    if (v) out[k] = v;
  }
  return out;
}

/**
 * Connection settings given on the command line (`--database-url`, `--redis-url`, `--schema`,
 * `--prefix`): they win over the environment, and messages name the flag.
 */
export type ConnectionFlags = { databaseUrl?: string; redisUrl?: string; schema?: string; prefix?: string };

const FLAG_OF = {
  databaseUrl: ['DATABASE_URL', '--database-url'],
  redisUrl: ['REDIS_URL', '--redis-url'],
  schema: ['BQI_SCHEMA', '--schema'],
  prefix: ['BQI_PREFIX', '--prefix'],
} as const;

/** The environment with the flags in place of their variables, and the flag to name per variable. */
function applyFlags(env: Env, flags: ConnectionFlags): { env: Env; labels: Record<string, string> } {
  const merged: Env = { ...env };
  const labels: Record<string, string> = {};
  for (const [flag, [variable, label]] of Object.entries(FLAG_OF)) {
    const value = flags[flag as keyof ConnectionFlags];
    if (value === undefined) continue;
    merged[variable] = value;
    labels[variable] = label;
  }
  return { env: merged, labels };
}

function parse<S extends z.ZodObject>(
  schema: S,
  rawEnv: Env,
  required: string[],
  flags: ConnectionFlags = {},
): z.infer<S> {
  const { env, labels } = applyFlags(rawEnv, flags);
  const named = (variable: string) => labels[variable] ?? variable;
  const input = pickEnv(env, Object.keys(schema.shape));
  const issues: { variable: string; message: string }[] = [];
  for (const v of required) {
    if (!(v in input)) issues.push({ variable: named(v), message: REQUIRED_HINT[v] ?? 'is required' });
  }
  const parsed = schema.safeParse(input);
  if (!parsed.success) {
    for (const i of parsed.error.issues)
      issues.push({ variable: named(String(i.path[0] ?? '(environment)')), message: i.message });
  }
  if (parsed.success) {
    const { BQI_REDACTION, BQI_KEYRING } = parsed.data as { BQI_REDACTION?: string; BQI_KEYRING?: unknown };
    if (BQI_REDACTION !== undefined && BQI_KEYRING === undefined) {
      issues.push({ variable: 'BQI_REDACTION', message: REDACTION_KEYRING_HINT });
    }
  }
  if (issues.length > 0 || !parsed.success) throw new ConfigError(issues);
  const { REDIS_URL, BQI_PREFIX } = parsed.data as { REDIS_URL?: string; BQI_PREFIX?: string };
  if (REDIS_URL && BQI_PREFIX !== undefined && parseRedisUrl(REDIS_URL).kind === 'cluster' && !hasHashTag(BQI_PREFIX)) {
    throw new ConfigError([{ variable: named('BQI_PREFIX'), message: CLUSTER_PREFIX_HINT }]);
  }
  return parsed.data;
}

const REDACTION_KEYRING_HINT =
  "needs BQI_KEYRING: the policy is keyed from the keyring, so its references match the workers' ones";

const CLUSTER_PREFIX_HINT =
  'must hold a hash tag on Redis Cluster (REDIS_URL names cluster nodes), e.g. BQI_PREFIX={bull}: ' +
  "BullMQ's scripts touch several keys of a queue at once, which the cluster allows only within one slot";

/**
 * The operations process's configuration: DATABASE_URL and REDIS_URL are required (or their flags).
 * @throws {@link ConfigError} naming every bad variable
 */
export function loadConfig(env: Env = process.env, flags: ConnectionFlags = {}): Config {
  const e = parse(workerSchema, env, ['DATABASE_URL', 'REDIS_URL'], flags);
  return {
    databaseUrl: e.DATABASE_URL as string,
    redisUrl: e.REDIS_URL as string,
    schema: e.BQI_SCHEMA,
    prefix: e.BQI_PREFIX,
    auditQueue: e.BQI_AUDIT_QUEUE,
    auditConcurrency: e.BQI_AUDIT_CONCURRENCY,
    sweepEveryMs: e.BQI_SWEEP_EVERY_MS,
    shutdownTimeoutMs: e.BQI_SHUTDOWN_TIMEOUT_MS,
    ...(e.BQI_HTTP_PORT === undefined ? {} : { httpPort: e.BQI_HTTP_PORT }),
    httpHost: e.BQI_HTTP_HOST,
    ...confirmOperators(e.BQI_OPERATORS, e.BQI_CONFIRM_TOKEN, e.BQI_CONFIRM_ACTOR),
    ...(e.BQI_CONSOLE ? { console: true } : {}),
    ...(e.BQI_CONSOLE_DECRYPT?.length ? { consoleDecrypt: e.BQI_CONSOLE_DECRYPT } : {}),
    ...operatorJwtOf(e),
    preparedStatements: e.BQI_PREPARED_STATEMENTS,
    logLevel: e.LOG_LEVEL,
    ...(e.BQI_KEYRING ? { keyring: e.BQI_KEYRING } : {}),
    ...(e.BQI_REDACTION ? { redactionModule: e.BQI_REDACTION } : {}),
  };
}

/**
 * The CLI's configuration: only the variables it reads are validated; the URLs are checked for
 * presence by the commands that need them (`CliContext.require`).
 */
export function loadCliConfig(env: Env = process.env, flags: ConnectionFlags = {}): CliConfig {
  const e = parse(cliSchema, env, [], flags);
  return {
    schema: e.BQI_SCHEMA,
    prefix: e.BQI_PREFIX,
    auditQueue: e.BQI_AUDIT_QUEUE,
    preparedStatements: e.BQI_PREPARED_STATEMENTS,
    ...(e.DATABASE_URL ? { databaseUrl: e.DATABASE_URL } : {}),
    ...(e.REDIS_URL ? { redisUrl: e.REDIS_URL } : {}),
    ...(e.BQI_KEYRING ? { keyring: e.BQI_KEYRING } : {}),
    ...(e.BQI_REDACTION ? { redactionModule: e.BQI_REDACTION } : {}),
  };
}
