/**
 * `bullmq-idempotency/scanners`: the value scanners a redaction policy runs on every string it
 * keeps, the interface to replace them with (`createIdempotency({ valueScanner })`), and the pino
 * integration that logs through a policy. See src/scanners/README.md.
 */
export { DEFAULT_VALUE_SCANNER, type HitSink, type ValueScanner } from '../scanners/index.js';
export {
  type PinoRedactionConfig,
  type PinoRedactionOptions,
  type PinoRedactPathsOptions,
  type PinoSerializer,
  pinoRedactionOptions,
  pinoRedactPaths,
} from '../scanners/pino/pino.js';
