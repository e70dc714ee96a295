import { sha256 } from '../fingerprint/sha256.js';

/**
 * The BullMQ job id of the library's jobs for the bounded key `k`: `idem_` and the base64url
 * SHA-256 of the key (48 characters). Stable, never all digits and free of `:`, so BullMQ absorbs
 * a duplicate add while the job is kept. The producer names jobs by it, the ledger's record of
 * transitions stores it as a marker, and the audit grammar passes it for its own key only.
 */
export const jobIdOfKey = (k: string): string => `idem_${sha256(k, 'base64url')}`;
