/**
 * `bullmq-idempotency/ledger`: the Postgres ledger and what works on it directly (advanced use:
 * claims outside BullMQ, a sweeper of your own, keys and fingerprints by hand). `createIdempotency`
 * builds and closes all of it for you.
 */

export { MIGRATION_LOCK_TABLE, MIGRATION_TABLE, type MigrateOptions, migrate } from '../../migrations/migrate.js';
export {
  invalidateKey,
  type OperatorActionOptions,
  type OperatorActionResult,
  resolveKey,
} from '../audit/operator-actions.js';
export { DEFAULT_SCHEMA, type PostgresOptions } from '../db/connection.js';
export type { PoolLogger } from '../db/pool-errors.js';
export { canonicalJson } from '../fingerprint/canonical-json.js';
export { keyedFingerprint } from '../fingerprint/keyed-fingerprint.js';
export { type IntentTx, intentExecutor } from '../intents/executor.js';
export { intentChannel, pendingIntents } from '../intents/intent-store.js';
export { IntentListener } from '../intents/listener.js';
export {
  createSweeperWorker,
  DEFAULT_SWEEPER_QUEUE,
  type SweepOptions,
  scheduleLedgerSweeper,
  sweepLedger,
} from '../jobs/ledger-sweeper.js';
export {
  boundedKey,
  canonicalKey,
  idempotencyKeySchema,
  KEY_LIMITS,
  MAX_BOUNDED_KEY_LENGTH,
  parseCanonicalKey,
  parseIdempotencyKey,
} from '../keys/idempotency-key.js';
export {
  DEFAULT_MAX_RESULT_BYTES,
  type LedgerExecutor,
  type LedgerKeyring,
  type LedgerOptions,
  PostgresLedger,
} from '../ledger/postgres-ledger.js';
export { jobIdFor } from '../operation/enqueue.js';
export { type RerunOptions, type RerunOutcome, rerun } from '../operation/rerun.js';
export { type ResolvingOperation, resolvedResult } from '../operation/resolved-result.js';
export {
  type RetryJobOptions,
  type RetryWindowOptions,
  retryWindowMs,
  type WorkerTiming,
} from '../operation/retry-window.js';
export {
  DEFAULT_INTENT_GRACE_MS,
  DEFAULT_RELAY_BATCH_SIZE,
  DEFAULT_RELAY_MAX_BATCHES,
  DEFAULT_RELAY_RECHECK_MS,
  IntentRelay,
  type RelayCounts,
  type RelayOptions,
  relayIntents,
} from '../ops/intent-relay.js';
export { openRecordedError, type SealedErrorText } from '../sealing/sealed-error.js';
export { isSealedResult, SEALED_FIELD } from '../sealing/sealed-result.js';
export type * from '../types.js';
