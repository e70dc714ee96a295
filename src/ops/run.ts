/**
 * The operations process as a program (`bullmq-idempotency start`): configuration, start,
 * signals and exit codes, the CLI's:
 *
 * 0 clean shutdown · 1 shutdown deadline passed (workers force-closed), or any other failure ·
 * 3 bad configuration, a schema not migrated, or an HTTP port that cannot be listened on ·
 * 4 Postgres or Redis unreachable at start.
 *
 * Every start-up failure is one JSON log line (fatal, by code) on stdout and one plain line on
 * stderr; never a stack.
 */
import type { Logger } from 'pino';
import { type Config, type ConnectionFlags, loadConfig } from '../config/env.js';
import { ConfigError, reasonOf, ServiceUnavailableError } from '../config/errors.js';
import { EXIT } from '../config/exit-codes.js';
import { errorLabel } from '../errors/clean-name.js';
import { isIdempotencyError } from '../errors/idempotency-error.js';
import { createLogger } from './logger.js';
import { NotMigratedError } from './not-migrated.js';
import { HttpListenError, type OperationsProcess, startOperationsProcess } from './operations-process.js';

export { EXIT };

/** Signals this soon after the first one are taken as its duplicates. */
const DUPLICATE_SIGNAL_MS = 1_000;

type Env = Record<string, string | undefined>;

/** The exit code and the fields of the fatal log line of a start-up failure. */
function startFailure(err: unknown): { code: number; fields: Record<string, unknown>; message: string } {
  if (err instanceof ConfigError)
    return { code: EXIT.config, fields: { variables: err.variables }, message: err.message };
  if (err instanceof NotMigratedError) {
    return { code: EXIT.config, fields: { schema: err.schema, missing: err.missing }, message: err.message };
  }
  if (err instanceof HttpListenError) {
    return { code: EXIT.config, fields: { host: err.host, port: err.port, err: err.reason }, message: err.message };
  }
  if (err instanceof ServiceUnavailableError) {
    return {
      code: EXIT.unreachable,
      fields: { service: err.service, target: err.target, reason: err.reason },
      message: err.message,
    };
  }
  if (isIdempotencyError(err) && err.code === 'IDEMPOTENCY_CONFIG') {
    return { code: EXIT.config, fields: { err: err.code }, message: err.message };
  }
  return { code: EXIT.failure, fields: { err: errorLabel(err) }, message: `start failed: ${reasonOf(err)}` };
}

function reportStartFailure(logger: Logger, err: unknown): number {
  const { code, fields, message } = startFailure(err);
  logger.fatal({ ...fields, exitCode: code }, message);
  process.stderr.write(`${message}\n`);
  return code;
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
    return reportStartFailure(createLogger(), err);
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
    return reportStartFailure(logger, err);
  }
  if (stopSignal) {
    const pending = stopSignal;
    stopSignal = undefined;
    void stop(pending);
  }
  return finished;
}
