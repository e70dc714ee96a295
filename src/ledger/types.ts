import type { IdempotencyKey } from '../keys/idempotency-key.js';
import type { RecordedTransition } from './recorded-transition.js';
import type { LedgerStatus, Transition } from './states.js';
import type { AcquiringTransition } from './transitions.js';

// Public as a whole (src/types.ts re-exports the module): keep internal types elsewhere.
export type { LedgerStatus, Transition } from './states.js';

/**
 * How the downstream system behaves on a repeat, which decides what a crashed attempt's
 * expired lease means:
 * - `idempotent`: it accepts our key and returns the original outcome for a repeat, so the next
 *   attempt may take over and call again with the same key;
 * - `reconcile`: the outcome can be looked up; the next attempt takes over and must reconcile first;
 * - `none`: neither; an expired lease becomes `unknown` and is never retried unattended.
 */
export type Downstream = 'idempotent' | 'reconcile' | 'none';

/**
 * An error as recorded in the ledger: a stable code and class name (grammar-checked, else keyed
 * refs), the public message or a `sealed message, N bytes` marker, and the whole text sealed.
 */
export type RecordedError = {
  code: string;
  message: string;
  name?: string;
  /** The full text (message, stack, causes), sealed with the keyring; see `openRecordedError`. */
  sealed?: string;
};

/** A key as the ledger accepts it: the parts, or the bounded string form. */
export type KeyLike = IdempotencyKey | string;

export type ClaimOptions = {
  key: IdempotencyKey;
  /** The operation's name; part of the record, for operators. */
  operation: string;
  /** Fingerprint of the effect-bearing input (see `fingerprint()`). */
  fingerprint: string;
  /** Lease length in milliseconds; must be > 0. */
  leaseMs: number;
  /** How long a terminal record is kept and replayed, in milliseconds; must be > 0. */
  retentionMs: number;
  downstream: Downstream;
  /** Who holds the lease (worker id); informational, never used for decisions. */
  owner?: string;
  jobId?: string | undefined;
  queue?: string;
  taskId?: string | undefined;
  stepId?: string | undefined;
};

/** The result of a claim: exactly one claimer of a key gets `acquired`. */
export type ClaimOutcome =
  | {
      kind: 'acquired';
      key: string;
      epoch: number;
      leaseExpiresAt: Date;
      /** How the claim came about: first claim, takeover of an expired lease, reclaim after release/expiry/invalidation. */
      transition: AcquiringTransition;
      at: Date;
    }
  | { kind: 'completed'; key: string; epoch: number; result: unknown; completedAt: Date; expiresAt: Date; at: Date }
  | { kind: 'failed'; key: string; epoch: number; error: RecordedError; expiresAt: Date; at: Date }
  | { kind: 'inProgress'; key: string; epoch: number; leaseExpiresAt: Date; retryAfterMs: number; at: Date }
  | {
      kind: 'conflict';
      key: string;
      status: LedgerStatus;
      storedFingerprint: string;
      fingerprint: string;
      at: Date;
    }
  | {
      kind: 'unknown';
      key: string;
      epoch: number;
      error: RecordedError | null;
      /** True when this claim found the expired lease and moved the record to unknown. */
      transitioned: boolean;
      at: Date;
    };

/** A full ledger row, as `inspect` shows it. */
export type LedgerRecord = {
  key: string;
  namespace: string;
  resourceKey: string;
  version: string;
  operation: string;
  fingerprint: string;
  status: LedgerStatus;
  epoch: number;
  downstream: Downstream;
  leaseOwner: string | null;
  leaseExpiresAt: Date | null;
  retentionMs: number;
  result: unknown;
  error: RecordedError | null;
  retryable: boolean | null;
  lastTransition: Transition;
  jobId: string | null;
  queue: string | null;
  taskId: string | null;
  stepId: string | null;
  createdAt: Date;
  updatedAt: Date;
  /** When the current epoch was claimed, and how. */
  claimedAt: Date;
  claimTransition: Transition;
  completedAt: Date | null;
  expiresAt: Date | null;
  /**
   * Every transition of the row, oldest first, each recorded by the statement that made it;
   * `null` for a row last changed before they were recorded (migration 0005).
   */
  transitions: RecordedTransition[] | null;
};

/** A fenced write's receipt: the database time it took effect. */
export type WriteReceipt = { key: string; epoch: number; at: Date };

export type ResolveOutcome = { committed: true; result: unknown } | { committed: false };
