import { type Logger, pino } from 'pino';
import type { LogLevel } from '../config/env-variables.js';
import { DEFAULT_REDACTION_POLICY } from '../redaction/define-policy.js';
import { pinoRedactionOptions } from '../scanners/pino/pino.js';

/** JSON logs to stdout, redacted by the default policy; synchronous so nothing is lost on exit. */
export function createLogger(level: LogLevel = 'info'): Logger {
  return pino(
    { name: 'bullmq-idempotency', level, ...pinoRedactionOptions(DEFAULT_REDACTION_POLICY) },
    pino.destination({ dest: 1, sync: true }),
  );
}
