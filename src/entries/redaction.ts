/**
 * `bullmq-idempotency/redaction`: redaction policies (field classes, HMAC references, receipts),
 * for logs of your own and for auditors matching references. The public part of
 * src/redaction/index.ts (which also serves the library's own modules). The value scanners and
 * the pino integration are `bullmq-idempotency/scanners`; the names of the pino integration are
 * also here, as they were before it had an entry of its own.
 */
export {
  type CustomScannerInput,
  DEFAULT_REDACTION_POLICY,
  defineRedactionPolicy,
  FIELD_CLASSES,
  type FieldClass,
  identifierRef,
  type RedactedError,
  type RedactionPolicy,
  type RedactionPolicyInput,
  type RedactionReceipt,
  type RedactionResult,
  redact,
  redactDetails,
  redactError,
  redactString,
  verifyRef,
} from '../redaction/index.js';
export {
  type PinoRedactionConfig,
  type PinoRedactionOptions,
  type PinoSerializer,
  pinoRedactionOptions,
  pinoRedactPaths,
} from '../scanners/pino/pino.js';
