/**
 * `bullmq-idempotency/audit`: the audit trail's parts (advanced use: an emitter, a writer or a
 * backfill of your own, partitions on your own schedule, timelines from a store). `createIdempotency`
 * builds the emitter and, with `audit: { writer: true }`, the writer, keyed from one keyring.
 */
export { type AuditEvent, auditEventSchema, eventIdFor, redactionReceiptSchema } from '../audit/audit-event.js';
export { AuditStore, type AuditStoreOptions, type WriteBatchResult } from '../audit/audit-store.js';
export type { DeadLetterReason } from '../audit/dead-letter-reason.js';
export {
  AUDIT_JOB_NAME,
  AuditEmitter,
  type AuditEmitterOptions,
  type AuditRedactor,
  DEFAULT_MAX_EVENT_BYTES,
} from '../audit/emitter.js';
export {
  type AuditPartitionOptions,
  type AuditPartitionResult,
  auditHorizon,
  maintainAuditPartitions,
} from '../audit/partitions.js';
export { auditRedactor } from '../audit/redact-event.js';
export { type RefKeyUsage, refKeyUsage } from '../audit/ref-keys.js';
export {
  type IdentifierContext,
  type IdentifierStorer,
  identifierAsStored,
  identifierForms,
  identifierStorer,
  type StoredIdentifierField,
} from '../audit/stored-identifier.js';
export {
  buildTimeline,
  renderTimeline,
  type Timeline,
  type TimelineAttempt,
  type TimelineWait,
  timeline,
} from '../audit/timeline.js';
export type { TimelineConfirmation } from '../audit/timeline-confirmations.js';
export {
  type ChainHead,
  type ChainProblem,
  exportChainHeads,
  type VerifyOptions,
  type VerifyResult,
  verifyAuditChains,
} from '../audit/verify-chain.js';
export { auditWorkerFailures } from '../audit/worker-failures.js';
export {
  type BackfillOptions,
  type BackfillProgress,
  createBackfillWorker,
  DEFAULT_BACKFILL_QUEUE,
  drainOutbox,
  runBackfill,
} from '../jobs/audit-backfill.js';
export { type AuditWriterOptions, createAuditWriter, DEFAULT_AUDIT_QUEUE } from '../jobs/audit-writer.js';
export {
  BUILTIN_IDENTIFIER_FORMATS,
  type BuiltinIdentifierFormat,
  type IdentifierFormat,
  type IdentifierFormats,
} from '../redaction/identifier-formats.js';
