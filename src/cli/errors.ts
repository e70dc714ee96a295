import { CommanderError } from 'commander';
import { EXIT, type ExitCode } from '../config/exit-codes.js';
import { describeFailure as describeAnyFailure, type Failure } from '../config/failure.js';
import { ERROR_CODES, IdempotencyError, type IdempotencyErrorCode } from '../errors/idempotency-error.js';

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
 * `reportedCode` is the code printed before the message: the library error the command met when
 * one is given (`IDEMPOTENCY_SEAL_KEY_UNKNOWN`, `IDEMPOTENCY_CONFIRMATION_ANSWERED`…),
 * `IDEMPOTENCY_ILLEGAL_TRANSITION` for exit 6, else `code`.
 */
export class CliError extends IdempotencyError<CliErrorCode> {
  readonly reportedCode: IdempotencyErrorCode;

  constructor(
    readonly exitCode: ExitCode,
    message: string,
    reportedCode?: IdempotencyErrorCode,
  ) {
    const code = CODE_OF_EXIT[exitCode] ?? ERROR_CODES.commandFailed;
    super(code, message, { exitCode });
    this.reportedCode = reportedCode ?? (exitCode === EXIT.illegalTransition ? ERROR_CODES.illegalTransition : code);
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

/**
 * Maps any error to the code, message and exit code the CLI reports (see
 * `describeFailure` of config/failure.ts, the vocabulary shared with the operations process).
 */
export function describeFailure(err: unknown, schema: string): Failure {
  if (err instanceof CommanderError) {
    // commander has already printed its message (and the help hint); help and version exit 0.
    return { code: ERROR_CODES.usage, exitCode: err.exitCode === 0 ? EXIT.ok : EXIT.usage, message: '', fields: {} };
  }
  return describeAnyFailure(err, { schema });
}
