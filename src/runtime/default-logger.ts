import { scannedLogger, type ValueScanner } from '../scanners/index.js';
import type { Logger } from '../shared/logger.js';

/** A logger that says nothing: `logger: false`, and the default in production. */
export const SILENT_LOGGER: Logger = { debug() {}, info() {}, warn() {}, error() {} };

/**
 * The runtime's logger when none is given: outside production, warnings and errors go to stderr
 * as one readable line each (`bullmq-idempotency warn: <message> {fields}`), so a developer sees
 * a failed attempt's cause in the terminal; in production (`NODE_ENV=production`) nothing, since
 * an application there brings its own logger. What the library logs is already structured
 * (codes, class names, scanned text), never a payload.
 */
export function defaultLogger(
  env: NodeJS.ProcessEnv = process.env,
  write: (line: string) => void = (line) => process.stderr.write(line),
): Logger {
  if (env.NODE_ENV === 'production') return SILENT_LOGGER;
  const line = (level: string) => (obj: object, msg?: string) => {
    const fields = JSON.stringify(obj, errorsAsText);
    const text = [msg, fields === '{}' ? undefined : fields].filter(Boolean).join(' ');
    write(`bullmq-idempotency ${level}: ${text.replace(/[\r\n]+/g, ' ')}\n`);
  };
  return { debug() {}, info() {}, warn: line('warn'), error: line('error') };
}

/** Errors as `Name: message` (JSON would show `{}`). */
function errorsAsText(_key: string, value: unknown): unknown {
  return value instanceof Error ? `${value.name}: ${value.message}` : value;
}

/**
 * The runtime's logger (`logger: false`, a logger of yours, or {@link defaultLogger}), its lines
 * through `valueScanner` when one is given (see `scannedLogger`); a silent one stays silent.
 */
export function runtimeLogger(logger: Logger | false | undefined, valueScanner: ValueScanner | undefined): Logger {
  const chosen = logger === false ? SILENT_LOGGER : (logger ?? defaultLogger());
  return valueScanner === undefined || chosen === SILENT_LOGGER ? chosen : scannedLogger(chosen, valueScanner);
}
