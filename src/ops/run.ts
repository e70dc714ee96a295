/**
 * The operations process as a program (`bullmq-idempotency start`): configuration, start,
 * signals and exit codes, the CLI's:
 *
 * 0 clean shutdown · 1 shutdown deadline passed (workers force-closed), or any other failure ·
 * 3 bad configuration (a database or role that does not exist and refused credentials too), a
 * schema not migrated, or an HTTP port that cannot be listened on ·
 * 4 Postgres or Redis unreachable at start (refused, timed out, a name that does not resolve).
 *
 * Every start-up failure is one JSON log line (fatal, with its code) on stdout and `CODE: message`
 * lines on stderr, the codes of the Errors table (docs/api.md); never a stack.
 */
import type { Logger } from 'pino';
import { type Config, type ConnectionFlags, loadConfig } from '../config/env.js';
import { EXIT } from '../config/exit-codes.js';
import { describeFailure, formatFailure } from '../config/failure.js';
import { errorLabel } from '../errors/clean-name.js';
import { ERROR_CODES } from '../errors/idempotency-error.js';
import { createLogger } from './logger.js';
import { type OperationsProcess, startOperationsProcess } from './operations-process.js';

export { EXIT };

/** Signals this soon after the first one are taken as its duplicates. */
const DUPLICATE_SIGNAL_MS = 1_000;

type Env = Record<string, string | undefined>;

/**
 * Reports a start-up failure in the CLI's vocabulary (config/failure.ts): one fatal JSON line on
 * stdout with its code and fields, and `CODE: message` on stderr; returns the exit code.
 */
function reportStartFailure(logger: Logger, err: unknown, schema: string): number {
  const failure = describeFailure(err, { schema });
  const message = failure.code === ERROR_CODES.commandFailed ? `start failed: ${failure.message}` : failure.message;
  const fields = failure.code === ERROR_CODES.commandFailed ? { err: errorLabel(err) } : failure.fields;
  logger.fatal({ code: failure.code, ...fields, exitCode: failure.exitCode }, message);
  process.stderr.write(formatFailure({ code: failure.code, message }));
  return failure.exitCode;
}

/**
 * Runs the operations process until SIGTERM or SIGINT and returns its exit code (the caller
 * exits with it). A second signal more than a second after the first exits 1 at once.
 */
export async function runOperationsProcess(options: { env?: Env; flags?: ConnectionFlags } = {}): Promise<number> {
  let config: Config;
  try {
    config = loadConfig(options.env ?? process.env, options.flags);
  } catch (err) {
    const schema = options.flags?.schema ?? (options.env ?? process.env).BQI_SCHEMA?.trim() ?? 'public';
    return reportStartFailure(createLogger(), err, schema || 'public');
  }
  const logger = createLogger(config.logLevel);
  let proc: OperationsProcess | undefined;
  let stopSignal: string | undefined;
  let stopAt = 0;
  let finish: (code: number) => void = () => {};
  const finished = new Promise<number>((resolve) => {
    finish = resolve;
  });

  const stop = async (reason: string, code: number = EXIT.ok) => {
    if (stopSignal) {
      // One keypress can deliver a signal twice (the terminal's process group, and a wrapper
      // relaying it): only a signal well after the first one means "stop now".
      if (Date.now() - stopAt < DUPLICATE_SIGNAL_MS) return;
      logger.warn({ signal: reason }, 'second signal during shutdown: exiting now');
      process.exit(EXIT.failure);
    }
    stopSignal = reason;
    stopAt = Date.now();
    if (!proc) return; // still starting: stopped as soon as the start finishes
    // Should the event loop empty before the close finishes, the process still says it failed.
    process.exitCode = EXIT.failure;
    logger.info({ signal: reason, timeoutMs: config.shutdownTimeoutMs }, 'shutting down');
    const { clean } = await proc.close();
    const exitCode = clean ? code : EXIT.failure;
    logger.info({ exitCode }, clean ? 'stopped' : 'stopped after force-closing');
    finish(exitCode);
  };
  process.on('SIGTERM', () => void stop('SIGTERM'));
  process.on('SIGINT', () => void stop('SIGINT'));
  process.on('unhandledRejection', (err) => {
    logger.fatal({ err: errorLabel(err) }, 'unhandled rejection');
    void stop('unhandledRejection', EXIT.failure);
  });
  process.on('uncaughtException', (err) => {
    logger.fatal({ err: errorLabel(err) }, 'uncaught exception');
    void stop('uncaughtException', EXIT.failure);
  });

  try {
    proc = await startOperationsProcess(config, { logger });
  } catch (err) {
    return reportStartFailure(logger, err, config.schema);
  }
  if (stopSignal) {
    const pending = stopSignal;
    stopSignal = undefined;
    void stop(pending);
  }
  return finished;
}
