import { z } from 'zod';
import { IdempotencyConfigError } from '../errors/errors.js';
import { DURATION_FORMS, parseDurationText } from '../operation/duration.js';
import { parseKeyringSpec } from '../sealing/keyring.js';
import { KEYRING_SPEC_FORM } from '../sealing/keyring-spec.js';
import { parseOperators } from '../shared/operators.js';
import { parseRedisUrl, RedisUrlError } from './redis-url.js';

/**
 * Each environment variable's reading and check, as one zod field per variable, with the
 * defaults they fall back to. Apart from `env.ts`, which picks the variables a process reads,
 * applies the command line's flags and builds its configuration: these say only what one value
 * may be, and every message here is told under its variable's name there.
 */

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
export const keyringSpec = z.string().transform((spec, ctx) => {
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

export const fields = {
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
  BQI_REDACTION: z.string().max(4096, 'must be a file path of at most 4096 characters').optional(),
  LOG_LEVEL: z.enum(LOG_LEVELS, { error: `must be one of ${LOG_LEVELS.join(', ')}` }).default('info'),
  BQI_PREPARED_STATEMENTS: z
    .enum(['true', 'false', '1', '0'], { error: 'must be true or false' })
    .default('true')
    .transform((v) => v === 'true' || v === '1'),
};
