import type { Logger } from '../shared/logger.js';
import type { HitSink } from './scanner.js';
import { policyScanner, type ValueScanner } from './value-scanner.js';

/** Fields nested deeper than this are handed on as they are (the library logs flat fields). */
const MAX_DEPTH = 8;
const NO_HITS: HitSink = { hit() {} };

/**
 * A logger whose lines pass through `scanner` before `logger` sees them: the message, and every
 * string of the fields (in plain objects and arrays, an error's message and stack). What the
 * library logs is structured already (codes, class names, keys, scanned error text); this is
 * the logs' use of a scanner given to `createIdempotency` as `valueScanner`. A scanner that
 * throws loses the text it was given, never the line.
 */
export function scannedLogger(logger: Logger, scanner: ValueScanner): Logger {
  const safe = policyScanner([], [], scanner).scanner;
  const scan = (text: string) => safe.scan(text, NO_HITS);
  const clean = (value: unknown, depth: number): unknown => {
    if (typeof value === 'string') return scan(value);
    if (typeof value !== 'object' || value === null || depth >= MAX_DEPTH) return value;
    if (value instanceof Error) {
      const copy = new Error(scan(value.message));
      copy.name = value.name;
      copy.stack = value.stack === undefined ? `${copy.name}: ${copy.message}` : scan(value.stack);
      return copy;
    }
    if (Array.isArray(value)) return value.map((v) => clean(v, depth + 1));
    const proto: unknown = Object.getPrototypeOf(value);
    if (proto !== Object.prototype && proto !== null) return value;
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, clean(v, depth + 1)]));
  };
  const line =
    (write: Logger['warn']): Logger['warn'] =>
    (obj, msg) =>
      msg === undefined ? write(clean(obj, 0) as object) : write(clean(obj, 0) as object, scan(msg));
  return {
    debug: line(logger.debug.bind(logger)),
    info: line(logger.info.bind(logger)),
    warn: line(logger.warn.bind(logger)),
    error: line(logger.error.bind(logger)),
  };
}
