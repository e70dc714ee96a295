import { z } from 'zod';
import { IdempotencyConfigError } from '../errors/errors.js';
import { DURATION_FORMS, parseDurationText } from '../operation/duration.js';
import { type Keyring, parseKeyringSpec } from '../sealing/keyring.js';
import { KEYRING_SPEC_FORM } from '../sealing/keyring-spec.js';
import { checkOperatorJwt, type OperatorJwtOptions, parseOperatorJwks } from '../shared/operator-jwt.js';
import { type Operator, parseOperators, tokenDigest } from '../shared/operators.js';
import { ConfigError } from './errors.js';
import { hasHashTag, parseRedisUrl, RedisUrlError } from './redis-url.js';

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
};

/** What the CLI reads: the URLs are required only by the commands that use them. */
export type CliConfig = Pick<Config, 'schema' | 'prefix' | 'auditQueue' | 'preparedStatements'> & {
  databaseUrl?: string;
  redisUrl?: string;
  /**
   * `BQI_KEYRING`: the keys that open sealed results and error text (`inspect --decrypt`) and
   * seal an operator's result (`resolve --committed`), in the form of `parseKeyringSpec`:
   * `k2:base64:…,k1:base64:…`, the current key first. Unset: sealed values stay sealed.
   */
  keyring?: Keyring;
};

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

export const CONFIG_DEFAULTS = {
  schema: 'public',
  prefix: 'bull',
  auditQueue: 'bullmq-idempotency-audit',
  auditConcurrency: 4,
  sweepEveryMs: 60_000,
  shutdownTimeoutMs: 10_000,
  httpHost: '127.0.0.1',
  logLevel: 'info',
} as const;

/** The schema name is interpolated into SQL, so only plain identifiers (as `checkSchema`). */
const IDENT = /^[a-z_][a-z0-9_]{0,62}$/;
// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what is refused
const CONTROL_OR_SPACE = /[\s\u0000-\u001f\u007f-\u009f]/;

function urlWithProtocol(protocols: string[], label: string) {
  return z.string().refine((s) => {
    try {
      const u = new URL(s);
      return protocols.includes(u.protocol) && u.hostname.length > 0;
    } catch {
      return false;
    }
  }, `must be a ${label} URL`);
}

const databaseUrl = urlWithProtocol(['postgres:', 'postgresql:'], 'postgres://');
const redisUrl = z.string().superRefine((s, ctx) => {
  try {
    parseRedisUrl(s);
  } catch (err) {
    if (!(err instanceof RedisUrlError)) throw err;
    ctx.addIssue({ code: 'custom', message: err.message });
  }
});

/** A duration in the forms the API takes (`60000`, `'1m'`), parsed by the library's one parser. */
const positiveMs = (fallback: number) =>
  z
    .string()
    .transform((text, ctx) => {
      const ms = parseDurationText(text);
      if (ms === undefined) {
        ctx.addIssue({ code: 'custom', message: `must be a positive duration: ${DURATION_FORMS}` });
        return z.NEVER;
      }
      return ms;
    })
    .default(fallback);

const port = z
  .string()
  .regex(/^\d+$/, 'must be a port number')
  .transform(Number)
  .refine((n) => n >= 0 && n <= 65_535, 'must be between 0 and 65535');

const positiveInt = (fallback: number, max: number) =>
  z
    .string()
    .regex(/^\d+$/, 'must be a whole number')
    .transform(Number)
    .refine((n) => n > 0 && n <= max, `must be between 1 and ${max}`)
    .default(fallback);

const name = (what: string, max: number) =>
  z
    .string()
    .max(max, `must be at most ${max} characters`)
    .refine((s) => !CONTROL_OR_SPACE.test(s), `must be a ${what} without white space or control characters`);

/**
 * A keyring spec, parsed by the library's one parser (`parseKeyringSpec`). Its messages name
 * entries, key ids and what is wrong (no id, not base64, repeated id, weak secret), never the
 * secrets; an error that is not the parser's own is replaced by a fixed message.
 */
const keyringSpec = z.string().transform((spec, ctx) => {
  try {
    return parseKeyringSpec(spec);
  } catch (err) {
    ctx.addIssue({
      code: 'custom',
      message:
        err instanceof IdempotencyConfigError
          ? `is not a usable keyring: ${err.message}`
          : `is not a usable keyring (expected ${KEYRING_SPEC_FORM})`,
    });
    return z.NEVER;
  }
});

const fields = {
  DATABASE_URL: databaseUrl,
  REDIS_URL: redisUrl,
  BQI_SCHEMA: z
    .string()
    .regex(IDENT, `must be a lower-case SQL identifier matching ${IDENT}`)
    .default(CONFIG_DEFAULTS.schema),
  BQI_PREFIX: name('BullMQ prefix', 200).default(CONFIG_DEFAULTS.prefix),
  BQI_AUDIT_QUEUE: name('queue name', 200)
    .refine((s) => !s.includes(':'), 'must not contain ":" (BullMQ refuses it in queue names)')
    .default(CONFIG_DEFAULTS.auditQueue),
  BQI_AUDIT_CONCURRENCY: positiveInt(CONFIG_DEFAULTS.auditConcurrency, 64),
  BQI_SWEEP_EVERY_MS: positiveMs(CONFIG_DEFAULTS.sweepEveryMs),
  BQI_SHUTDOWN_TIMEOUT_MS: positiveMs(CONFIG_DEFAULTS.shutdownTimeoutMs),
  BQI_HTTP_PORT: port.optional(),
  BQI_HTTP_HOST: name('host name or address', 255).default(CONFIG_DEFAULTS.httpHost),
  BQI_OPERATORS: z
    .string()
    .transform((text, ctx) => {
      try {
        return parseOperators(text);
      } catch (err) {
        // The parser's messages name entries by position and what is wrong, never a digest.
        ctx.addIssue({
          code: 'custom',
          message: err instanceof IdempotencyConfigError ? err.message.replace(/^BQI_OPERATORS: /, '') : 'is malformed',
        });
        return z.NEVER;
      }
    })
    .optional(),
  BQI_CONFIRM_TOKEN: z
    .string()
    .min(32, 'must be at least 32 characters (deprecated: set BQI_OPERATORS, see `bullmq-idempotency operators token`)')
    .max(1000)
    .optional(),
  BQI_CONFIRM_ACTOR: z
    .string()
    .regex(/^[^\s;,=]{1,200}$/, 'must be 1 to 200 characters without white space, ";", "," or "="')
    .optional(),
  BQI_CONSOLE: z
    .enum(['on', 'off'], { error: 'must be on or off' })
    .default('off')
    .transform((v) => v === 'on'),
  BQI_CONSOLE_DECRYPT: z
    .string()
    .transform((s) =>
      s
        .split(',')
        .map((a) => a.trim())
        .filter((a) => a !== ''),
    )
    .refine(
      (list) => list.every((a) => /^[^\s;,=]{1,200}$/.test(a)),
      'must list actors of BQI_OPERATORS, comma-separated',
    )
    .optional(),
  BQI_OPERATOR_JWT_ISSUER: z.string().max(2000).optional(),
  BQI_OPERATOR_JWT_AUDIENCE: z.string().max(2000).optional(),
  BQI_OPERATOR_JWKS_URL: z.string().max(2000).optional(),
  BQI_OPERATOR_JWKS: z.string().max(100_000).optional(),
  BQI_OPERATOR_JWT_PUBLIC_KEY: z.string().max(20_000).optional(),
  BQI_OPERATOR_JWT_ACTOR_CLAIM: z.string().max(100).optional(),
  BQI_OPERATOR_JWT_NAMESPACES_CLAIM: z.string().max(100).optional(),
  BQI_OPERATOR_JWT_NAMESPACE_PREFIX: z.string().max(100).optional(),
  BQI_OPERATOR_JWT_ALGORITHMS: z.string().max(200).optional(),
  LOG_LEVEL: z.enum(LOG_LEVELS, { error: `must be one of ${LOG_LEVELS.join(', ')}` }).default('info'),
  BQI_PREPARED_STATEMENTS: z
    .enum(['true', 'false', '1', '0'], { error: 'must be true or false' })
    .default('true')
    .transform((v) => v === 'true' || v === '1'),
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
  if (issues.length > 0 || !parsed.success) throw new ConfigError(issues);
  const { REDIS_URL, BQI_PREFIX } = parsed.data as { REDIS_URL?: string; BQI_PREFIX?: string };
  if (REDIS_URL && BQI_PREFIX !== undefined && parseRedisUrl(REDIS_URL).kind === 'cluster' && !hasHashTag(BQI_PREFIX)) {
    throw new ConfigError([{ variable: named('BQI_PREFIX'), message: CLUSTER_PREFIX_HINT }]);
  }
  return parsed.data;
}

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
  };
}

/**
 * The operators of the confirmation endpoint: `BQI_OPERATORS`, and the deprecated shared
 * `BQI_CONFIRM_TOKEN` as one operator of every namespace, named by `BQI_CONFIRM_ACTOR` (required
 * with it: an answer is recorded under an actor the configuration names, never the caller's say).
 */
function confirmOperators(
  operators: Operator[] | undefined,
  token: string | undefined,
  actor: string | undefined,
): Pick<Config, 'operators' | 'sharedConfirmToken'> {
  if (token === undefined) {
    if (actor !== undefined) {
      throw new ConfigError([{ variable: 'BQI_CONFIRM_ACTOR', message: 'is only read with BQI_CONFIRM_TOKEN' }]);
    }
    return operators ? { operators } : {};
  }
  if (actor === undefined) {
    throw new ConfigError([
      {
        variable: 'BQI_CONFIRM_TOKEN',
        message:
          'needs BQI_CONFIRM_ACTOR (the actor its answers are recorded under); better, replace both by BQI_OPERATORS: one token per operator, made by `bullmq-idempotency operators token`',
      },
    ]);
  }
  const shared: Operator = { actor, namespaces: ['*'], sha256: tokenDigest(token).toString('hex') };
  return { operators: [...(operators ?? []), shared], sharedConfirmToken: true };
}

const JWT_VARIABLES = [
  'BQI_OPERATOR_JWT_ISSUER',
  'BQI_OPERATOR_JWT_AUDIENCE',
  'BQI_OPERATOR_JWKS_URL',
  'BQI_OPERATOR_JWKS',
  'BQI_OPERATOR_JWT_PUBLIC_KEY',
  'BQI_OPERATOR_JWT_ACTOR_CLAIM',
  'BQI_OPERATOR_JWT_NAMESPACES_CLAIM',
  'BQI_OPERATOR_JWT_NAMESPACE_PREFIX',
  'BQI_OPERATOR_JWT_ALGORITHMS',
] as const;

/** The operator JWTs of the `BQI_OPERATOR_JWT_*` variables, checked; none when none is set. */
function operatorJwtOf(e: { [V in (typeof JWT_VARIABLES)[number]]?: string | undefined }): Pick<Config, 'operatorJwt'> {
  if (JWT_VARIABLES.every((v) => e[v] === undefined)) return {};
  const list = (v: string | undefined) =>
    (v ?? '')
      .split(',')
      .map((s) => s.trim())
      .filter((s) => s !== '');
  try {
    const jwt: OperatorJwtOptions = {
      issuer: list(e.BQI_OPERATOR_JWT_ISSUER),
      audience: list(e.BQI_OPERATOR_JWT_AUDIENCE),
      ...(e.BQI_OPERATOR_JWKS_URL === undefined ? {} : { jwksUrl: e.BQI_OPERATOR_JWKS_URL }),
      ...(e.BQI_OPERATOR_JWKS === undefined ? {} : { jwks: parseOperatorJwks(e.BQI_OPERATOR_JWKS) }),
      ...(e.BQI_OPERATOR_JWT_PUBLIC_KEY === undefined ? {} : { publicKey: e.BQI_OPERATOR_JWT_PUBLIC_KEY }),
      ...(e.BQI_OPERATOR_JWT_ACTOR_CLAIM === undefined ? {} : { actorClaim: e.BQI_OPERATOR_JWT_ACTOR_CLAIM }),
      ...(e.BQI_OPERATOR_JWT_NAMESPACES_CLAIM === undefined
        ? {}
        : { namespacesClaim: e.BQI_OPERATOR_JWT_NAMESPACES_CLAIM }),
      ...(e.BQI_OPERATOR_JWT_NAMESPACE_PREFIX === undefined
        ? {}
        : { namespacePrefix: e.BQI_OPERATOR_JWT_NAMESPACE_PREFIX }),
      ...(e.BQI_OPERATOR_JWT_ALGORITHMS === undefined ? {} : { algorithms: list(e.BQI_OPERATOR_JWT_ALGORITHMS) }),
    };
    checkOperatorJwt(jwt);
    return { operatorJwt: jwt };
  } catch (err) {
    if (!(err instanceof IdempotencyConfigError)) throw err;
    // The messages name the option and what is wrong, never a key.
    throw new ConfigError([{ variable: 'BQI_OPERATOR_JWT_*', message: err.message.replace(/^operator JWTs: /, '') }]);
  }
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
  };
}
