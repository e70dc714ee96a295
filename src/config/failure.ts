/**
 * The one vocabulary of the CLI's and the operations process's failures: every error becomes a
 * code of `ERROR_CODES` (the Errors table, docs/api.md), an exit code, and lines printed as
 * `CODE: message` on stderr. Free of heavy imports: the CLI reports usage errors with it before
 * pg, BullMQ or zod are loaded.
 */

import { migrateCommand } from '../errors/errors.js';
import {
  ERROR_CODES,
  type IdempotencyError,
  type IdempotencyErrorCode,
  isIdempotencyError,
} from '../errors/idempotency-error.js';
import { ConfigError, reasonOf, ServiceUnavailableError } from './errors.js';
import { EXIT } from './exit-codes.js';

/** A failure as reported: its code, exit code, message, and the fields of its log line. */
export type Failure = {
  /** A code of `ERROR_CODES`, printed before every line of the message. */
  code: IdempotencyErrorCode;
  exitCode: number;
  /** One line per problem; never a stack (unless `BQI_DEBUG` is set) and never key material. */
  message: string;
  /** What a log line carries besides the code: variables, schema, service… */
  fields: Record<string, unknown>;
};

/** Where the failure happened: the schema the command or process was given. */
export type FailureContext = { schema: string };

/** Postgres: a relation or schema that does not exist (the library's tables are not there yet). */
const NOT_MIGRATED_CODES = new Set(['42P01', '3F000']);

/** Postgres: the database or the role does not exist, or the credentials are refused. */
const REFUSED_SESSION_CODES = new Set(['3D000', '28000', '28P01']);

/** Network-level failures after the start-up check: the service went away mid-command. */
const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'ENOTFOUND',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EAI_AGAIN',
  'EPIPE',
  '57P01', // admin_shutdown
  '57P03', // cannot_connect_now
]);

/** The library's relations are named `idempotency_…` and `audit_…`. */
const LIBRARY_RELATION = /^(?:idempotency|audit)_/;

export { migrateCommand };

function notMigrated(schema: string, missing: string[]): Failure {
  return {
    code: ERROR_CODES.notMigrated,
    exitCode: EXIT.config,
    message:
      `schema ${schema} is not migrated (missing ${missing.join(', ')}): run \`${migrateCommand(schema)}\` ` +
      'with the same DATABASE_URL',
    fields: { schema, missing },
  };
}

/** An error of a command with its own exit code (the CLI's `CliError`), told by its shape. */
type WithExitCode = { code: IdempotencyErrorCode; exitCode: number; reportedCode?: IdempotencyErrorCode };

function hasExitCode(err: unknown): err is WithExitCode & Error {
  return isIdempotencyError(err) && typeof (err as { exitCode?: unknown }).exitCode === 'number';
}

/**
 * Maps any error to its code, exit code and message: 2 usage, 3 configuration (bad or missing
 * settings, a database or role that does not exist, refused credentials, a schema not
 * migrated), 4 an unreachable service, 5 not found, 6 an illegal transition, 130 interrupted,
 * 1 anything else.
 *
 * @example
 * const f = describeFailure(err, { schema: 'app' });
 * process.stderr.write(formatFailure(f));
 * process.exitCode = f.exitCode;
 */
export function describeFailure(err: unknown, context: FailureContext): Failure {
  if (hasExitCode(err)) {
    return { code: err.reportedCode ?? err.code, exitCode: err.exitCode, message: err.message, fields: {} };
  }
  if (err instanceof ConfigError) {
    return { code: err.code, exitCode: EXIT.config, message: err.message, fields: { variables: err.variables } };
  }
  if (err instanceof ServiceUnavailableError) {
    return {
      code: err.code,
      exitCode: EXIT.unreachable,
      message: err.message,
      fields: { service: err.service, target: err.target, reason: err.reason },
    };
  }
  if (isIdempotencyError(err)) return libraryFailure(err, context);
  const sqlstate = (err as { code?: unknown } | null)?.code;
  if (typeof sqlstate === 'string' && NOT_MIGRATED_CODES.has(sqlstate)) {
    const missing = missingRelation(err, context.schema);
    if (missing) return notMigrated(context.schema, [missing]);
  }
  if (typeof sqlstate === 'string' && REFUSED_SESSION_CODES.has(sqlstate)) {
    return {
      code: ERROR_CODES.envConfig,
      exitCode: EXIT.config,
      message: `DATABASE_URL is refused by Postgres: ${reasonOf(err)}`,
      fields: { variables: ['DATABASE_URL'] },
    };
  }
  if (typeof sqlstate === 'string' && NETWORK_CODES.has(sqlstate)) {
    return {
      code: ERROR_CODES.serviceUnavailable,
      exitCode: EXIT.unreachable,
      message: `lost the connection: ${reasonOf(err)}`,
      fields: { reason: sqlstate },
    };
  }
  const message = err instanceof Error ? reasonOf(err) : String(err);
  return {
    code: ERROR_CODES.commandFailed,
    exitCode: EXIT.failure,
    message: process.env.BQI_DEBUG && err instanceof Error && err.stack ? err.stack : message,
    fields: {},
  };
}

function libraryFailure(err: IdempotencyError, context: FailureContext): Failure {
  const failure = (exitCode: number, message = err.message): Failure => ({
    code: err.code,
    exitCode,
    message,
    fields: {},
  });
  switch (err.code) {
    case ERROR_CODES.notMigrated: {
      const d = err.details as { schema: string; missing: string[] };
      return notMigrated(d.schema ?? context.schema, d.missing ?? []);
    }
    case ERROR_CODES.illegalTransition: {
      const d = err.details as { key: string; from: string | null | undefined };
      return d.from === null || d.from === undefined
        ? {
            code: ERROR_CODES.notFound,
            exitCode: EXIT.notFound,
            message: `no ledger record for key ${d.key}`,
            fields: {},
          }
        : failure(EXIT.illegalTransition);
    }
    case ERROR_CODES.notFound:
    case ERROR_CODES.confirmationNotFound:
      return failure(EXIT.notFound);
    case ERROR_CODES.usage:
    case ERROR_CODES.invalidKey:
    case ERROR_CODES.invalidInput:
    case ERROR_CODES.tooLarge:
    case ERROR_CODES.serialization:
      return failure(EXIT.usage);
    case ERROR_CODES.config:
    case ERROR_CODES.envConfig:
    case ERROR_CODES.httpListen:
      return { ...failure(EXIT.config), fields: err.code === ERROR_CODES.httpListen ? { ...err.details } : {} };
    case ERROR_CODES.invalidRedisUrl:
      return { code: ERROR_CODES.envConfig, exitCode: EXIT.config, message: `REDIS_URL ${err.message}`, fields: {} };
    case ERROR_CODES.serviceUnavailable:
      return failure(EXIT.unreachable);
    case ERROR_CODES.interrupted:
      return failure(EXIT.interrupted);
    default:
      return failure(EXIT.failure);
  }
}

/**
 * The library relation a 42P01/3F000 names (`relation "app.idempotency_ledger" does not exist`,
 * `schema "app" does not exist`), or undefined when it names something else: an application's
 * own table missing is not the library's migration to run.
 */
function missingRelation(err: unknown, schema: string): string | undefined {
  const message = err instanceof Error ? err.message : '';
  const relation = /relation "([^"]+)"/.exec(message)?.[1];
  if (relation !== undefined) {
    const name = relation.slice(relation.lastIndexOf('.') + 1);
    return LIBRARY_RELATION.test(name) ? name : undefined;
  }
  const missingSchema = /schema "([^"]+)"/.exec(message)?.[1];
  return missingSchema === schema ? `schema ${schema}` : undefined;
}

/**
 * The failure as printed on stderr: each line of its message after its code, one format for
 * every command, the operations process and the environment checks.
 *
 * @example
 * formatFailure({ code: 'IDEMPOTENCY_ENV_CONFIG', message: 'BQI_KEYRING is not a usable keyring: …' });
 * // 'IDEMPOTENCY_ENV_CONFIG: BQI_KEYRING is not a usable keyring: …\n'
 */
export function formatFailure(failure: Pick<Failure, 'code' | 'message'>): string {
  const lines = failure.message.split('\n').filter((l) => l.length > 0);
  if (lines.length === 0) return `${failure.code}\n`;
  return `${lines.map((l, i) => (i === 0 || !/^\s/.test(l) ? `${failure.code}: ${l}` : l)).join('\n')}\n`;
}
