// The ledger's two base vocabularies, with no imports: the transition table, the recorded
// transitions and the ledger's types all build on them.

/**
 * Status of a ledger record. The seed's `locked | completed | failed`, plus `unknown` (the
 * outcome of an attempt is ambiguous and needs reconciliation) and two claimable states that
 * keep the row so epochs keep rising: `released` (an attempt gave the key back, nothing
 * committed) and `invalidated` (an operator evicted the key).
 */
export type LedgerStatus = 'locked' | 'completed' | 'failed' | 'unknown' | 'released' | 'invalidated';

/** How the row changed at its last transition (kept for audit and reconstruction). */
export type Transition =
  | 'claimed'
  | 'takeover'
  | 'takeover_unknown'
  | 'reclaimed'
  | 'reclaimed_after_expiry'
  | 'reclaimed_after_invalidation'
  | 'completed'
  | 'failed'
  | 'failed_retryable'
  | 'released'
  | 'marked_unknown'
  | 'invalidated'
  | 'resolved_committed'
  | 'resolved_not_committed'
  | 'record_lost';
