import { CommanderError } from 'commander';
import { ConfigError, reasonOf, ServiceUnavailableError } from '../config/errors.js';
import { EXIT, type ExitCode } from '../config/exit-codes.js';
import { ERROR_CODES, IdempotencyError, isIdempotencyError } from '../errors/idempotency-error.js';

export { EXIT, type ExitCode };

/** The CLI's own refusals have these codes; every other exit is `IDEMPOTENCY_COMMAND_FAILED`. */
const CODE_OF_EXIT: Partial<Record<ExitCode, CliErrorCode>> = {
  [EXIT.usage]: ERROR_CODES.usage,
  [EXIT.notFound]: ERROR_CODES.notFound,
  [EXIT.interrupted]: ERROR_CODES.interrupted,
};

type CliErrorCode =
  | typeof ERROR_CODES.usage
  | typeof ERROR_CODES.notFound
  | typeof ERROR_CODES.interrupted
  | typeof ERROR_CODES.commandFailed;

/**
 * An error the CLI reports as a message and an exit code (no stack). Its `code` names the kind
 * (usage, not found, interrupted, or command failed) and `details.exitCode` is the exit code.
 */
export class CliError extends IdempotencyError<CliErrorCode> {
  constructor(
    readonly exitCode: ExitCode,
    message: string,
  ) {
    super(CODE_OF_EXIT[exitCode] ?? ERROR_CODES.commandFailed, message, { exitCode });
  }
}

export const usageError = (message: string) => new CliError(EXIT.usage, message);

/**
 * Who runs queued work (backfill jobs, audit batches): the operations process, the package's own
 * command or the application's process.
 */
export const OPERATIONS_PROCESS =
  'the operations process (`bullmq-idempotency start`, or a process of your own that runs ' +
  '`createBackfillWorker()` and `createAuditWriter()`)';
export const notFound = (message: string) => new CliError(EXIT.notFound, message);

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

/** Postgres: the library's tables or schema are missing (a configuration error: run `migrate`). */
const NOT_MIGRATED_CODES = new Set(['42P01', '3F000']);

/** Maps any error to the message to print and the exit code. */
export function describeFailure(err: unknown, schema: string): { exitCode: number; message: string } {
  if (err instanceof CommanderError) {
    // commander has already printed its message (and the help hint); help and version exit 0.
    return { exitCode: err.exitCode === 0 ? EXIT.ok : EXIT.usage, message: '' };
  }
  if (err instanceof CliError) return { exitCode: err.exitCode, message: err.message };
  if (err instanceof ConfigError) return { exitCode: EXIT.config, message: err.message };
  if (err instanceof ServiceUnavailableError) return { exitCode: EXIT.unreachable, message: err.message };
  if (isIdempotencyError(err)) {
    switch (err.code) {
      case ERROR_CODES.illegalTransition: {
        const d = err.details;
        return d.from === null || d.from === undefined
          ? { exitCode: EXIT.notFound, message: `no ledger record for key ${d.key}` }
          : { exitCode: EXIT.illegalTransition, message: err.message };
      }
      case ERROR_CODES.notFound:
        return { exitCode: EXIT.notFound, message: err.message };
      case ERROR_CODES.invalidKey:
      case ERROR_CODES.invalidInput:
      case ERROR_CODES.tooLarge:
      case ERROR_CODES.serialization:
        return { exitCode: EXIT.usage, message: err.message };
      case ERROR_CODES.config:
        return { exitCode: EXIT.config, message: err.message };
      default:
        return { exitCode: EXIT.failure, message: err.message };
    }
  }
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && NOT_MIGRATED_CODES.has(code)) {
    return {
      exitCode: EXIT.config,
      message: `${reasonOf(err)}: is schema ${schema} migrated? Run \`bullmq-idempotency migrate\` first`,
    };
  }
  if (typeof code === 'string' && NETWORK_CODES.has(code)) {
    return { exitCode: EXIT.unreachable, message: `lost the connection: ${reasonOf(err)}` };
  }
  const message = err instanceof Error ? reasonOf(err) : String(err);
  return { exitCode: EXIT.failure, message: process.env.BQI_DEBUG && err instanceof Error ? `${err.stack}` : message };
}
