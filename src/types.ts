/**
 * Glossary
 *
 * - **Operation**: one intended side effect ("create asset for approved task 42"), declared with
 *   `defineOperation()`: its input schema, effect-bearing fields, lease, retention, downstream mode.
 * - **Key**: `{ namespace, resourceKey, version }`, made when the intent is accepted, before the
 *   first attempt; every retry reuses it. Its bounded string (≤ 255 chars) is the ledger's primary
 *   key and the value sent downstream as `Idempotency-Key`.
 * - **Fingerprint**: SHA-256 of the canonical JSON (RFC 8785) of the effect-bearing input; the
 *   same key with another fingerprint is refused before any side effect.
 * - **Attempt**: one run of a job by a worker (a retry, a stall redelivery, an operator replay).
 * - **Lease**: the right of one attempt to perform the operation, for a while (renewed while it runs).
 * - **Epoch**: a counter that rises with every claim of a key; every write carries it, so an
 *   attempt whose lease was taken over cannot overwrite its successor (fencing).
 * - **Ledger record**: the Postgres row of a key: `locked`, `completed`, `failed`, `unknown`, or
 *   claimable again (`released`, `invalidated`, or expired).
 * - **Audit event**: a redacted record of a transition or a tool decision, for reconstruction.
 */
export type { IdempotencyKey } from './keys/idempotency-key.js';
// The ledger's vocabulary is public as a whole: every type src/ledger/types.ts exports is part
// of the API (it holds nothing internal).
export type * from './ledger/types.js';
