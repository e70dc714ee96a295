/**
 * `bullmq-idempotency/redaction`: redaction policies, their value scanners and the pino
 * integration, for logs of your own and for auditors matching references. The public part of
 * src/redaction/index.ts (which also serves the library's own modules).
 */
export {
  type CustomScannerInput,
  DEFAULT_REDACTION_POLICY,
  defineRedactionPolicy,
  FIELD_CLASSES,
  type FieldClass,
  identifierRef,
  type PinoRedactionConfig,
  type PinoRedactionOptions,
  type PinoSerializer,
  pinoRedactionOptions,
  pinoRedactPaths,
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
