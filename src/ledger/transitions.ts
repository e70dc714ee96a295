import { ERROR_CODES } from '../errors/idempotency-error.js';
import type { LedgerStatus, Transition } from './states.js';

/**
 * The audit event type of a ledger transition: the wrapper emits it live, the backfill derives it
 * from the ledger's record of the transition, both under the same id.
 */
export type TransitionEvent =
  | 'claimed'
  | 'takeover'
  | 'completed'
  | 'failed'
  | 'released'
  | 'unknown'
  | 'invalidated'
  | 'resolved';

/**
 * When a claim may take an existing row (the claimable predicate is made of these):
 * - `always`: whatever the fingerprint (an operator evicted the key);
 * - `same_fingerprint`: the same input, nothing committed;
 * - `expired`: the terminal record's retention has run out (a new input may run);
 * - `lease_expired`: the holder's lease ran out on the database clock, and the input is the same.
 */
export type ClaimGuard = 'always' | 'same_fingerprint' | 'expired' | 'lease_expired';

/** One transition of a ledger row: where it starts and ends, who makes it, and what the trail says. */
export type TransitionSpec = {
  /** The states the row may be in before (`absent`: no row). */
  from: 'absent' | readonly LedgerStatus[];
  to: LedgerStatus;
  /** A claimer (`claim`), the attempt holding the epoch (`holder`), or an operator (`operator`). */
  by: 'claim' | 'holder' | 'operator';
  /** For a claim of an existing row: when that row is claimable. */
  guard?: ClaimGuard;
  /** For a claim: the operation's downstream this transition is for (`none`: no idempotent API, no lookup). */
  downstream?: 'none' | 'other';
  event: TransitionEvent;
  decision: 'allow' | 'deny' | 'pending_confirmation';
  phase: 'intent' | 'outcome';
  /** The transition gives the attempt holding its epoch a lease (a new attempt starts). */
  startsAttempt: boolean;
  /** It records the outcome of the attempt of its own epoch. */
  endsAttempt: boolean;
  /** It fences the attempt of an earlier epoch that held a lease and recorded nothing (it lost it). */
  supersedes: boolean;
  /** The reason code of its event when the transition records no error code of its own. */
  reasonCode?: string;
};

const claim = { by: 'claim', event: 'claimed', decision: 'allow', phase: 'intent', startsAttempt: true } as const;
const outcome = { by: 'holder', from: ['locked'], phase: 'outcome', endsAttempt: true, supersedes: false } as const;
const resolved = {
  by: 'operator',
  from: ['unknown'],
  event: 'resolved',
  decision: 'allow',
  phase: 'outcome',
  startsAttempt: false,
  endsAttempt: false,
  supersedes: false,
} as const;

/**
 * Every ledger transition, once. The claim statement's claimable predicate and its choice of
 * transition are generated from it (`sql/fragments.ts`), the ledger maps outcomes by it, the audit
 * trail takes each transition's event type, decision and phase from it, and the timeline knows
 * from it which events start or end an attempt. A new `Transition` that is missing here does not
 * compile.
 */
export const TRANSITIONS = {
  claimed: { ...claim, from: 'absent', to: 'locked', endsAttempt: false, supersedes: false },
  takeover: {
    ...claim,
    event: 'takeover',
    from: ['locked'],
    guard: 'lease_expired',
    downstream: 'other',
    to: 'locked',
    endsAttempt: false,
    supersedes: true,
  },
  takeover_unknown: {
    by: 'claim',
    from: ['locked'],
    guard: 'lease_expired',
    downstream: 'none',
    to: 'unknown',
    event: 'unknown',
    decision: 'pending_confirmation',
    phase: 'outcome',
    startsAttempt: false,
    endsAttempt: false,
    supersedes: true,
    reasonCode: ERROR_CODES.leaseExpired,
  },
  reclaimed: {
    ...claim,
    from: ['released'],
    guard: 'same_fingerprint',
    to: 'locked',
    endsAttempt: false,
    supersedes: false,
  },
  reclaimed_after_expiry: {
    ...claim,
    from: ['completed', 'failed'],
    guard: 'expired',
    to: 'locked',
    endsAttempt: false,
    supersedes: false,
  },
  reclaimed_after_invalidation: {
    ...claim,
    from: ['invalidated'],
    guard: 'always',
    to: 'locked',
    endsAttempt: false,
    supersedes: false,
  },
  completed: { ...outcome, to: 'completed', event: 'completed', decision: 'allow', startsAttempt: false },
  failed: { ...outcome, to: 'failed', event: 'failed', decision: 'deny', startsAttempt: false },
  failed_retryable: { ...outcome, to: 'released', event: 'released', decision: 'allow', startsAttempt: false },
  released: { ...outcome, to: 'released', event: 'released', decision: 'allow', startsAttempt: false },
  marked_unknown: {
    ...outcome,
    to: 'unknown',
    event: 'unknown',
    decision: 'pending_confirmation',
    startsAttempt: false,
    reasonCode: 'IDEMPOTENCY_UNKNOWN_OUTCOME',
  },
  invalidated: {
    by: 'operator',
    from: ['locked', 'completed', 'failed', 'unknown', 'released', 'invalidated'],
    to: 'invalidated',
    event: 'invalidated',
    decision: 'allow',
    phase: 'outcome',
    startsAttempt: false,
    endsAttempt: false,
    supersedes: true,
    reasonCode: 'OPERATOR_INVALIDATED',
  },
  /**
   * The attempt holding an epoch found its row gone (or at a lower epoch) when it came to record
   * its outcome: it writes the row back, `unknown`, at its own epoch (`downstream: 'none'` only;
   * see `PostgresLedger.recordLost`). The record of the transitions before it went with the row.
   */
  record_lost: {
    by: 'holder',
    from: 'absent',
    to: 'unknown',
    event: 'unknown',
    decision: 'pending_confirmation',
    phase: 'outcome',
    startsAttempt: false,
    endsAttempt: true,
    supersedes: false,
    reasonCode: ERROR_CODES.recordLost,
  },
  resolved_committed: { ...resolved, to: 'completed', reasonCode: 'OPERATOR_RESOLVED_COMMITTED' },
  resolved_not_committed: { ...resolved, to: 'released', reasonCode: 'OPERATOR_RESOLVED_NOT_COMMITTED' },
} as const satisfies Record<Transition, TransitionSpec>;

/** A transition a claim makes. */
export type ClaimTransition = {
  [T in Transition]: (typeof TRANSITIONS)[T]['by'] extends 'claim' ? T : never;
}[Transition];

/** A claim transition that hands the claimer the lease (the `acquired` outcome). */
export type AcquiringTransition = {
  [T in ClaimTransition]: (typeof TRANSITIONS)[T]['startsAttempt'] extends true ? T : never;
}[ClaimTransition];

/** A transition the attempt holding an epoch makes when it records its outcome. */
export type OutcomeTransition = {
  [T in Transition]: (typeof TRANSITIONS)[T]['by'] extends 'holder' ? T : never;
}[Transition];

export const TRANSITION_NAMES = Object.keys(TRANSITIONS) as Transition[];

/** The spec of a transition (any string read back from the database included: undefined when unknown). */
export function transitionSpec(name: string): TransitionSpec | undefined {
  return Object.hasOwn(TRANSITIONS, name) ? (TRANSITIONS as Record<string, TransitionSpec>)[name] : undefined;
}

/** A claim transition of an existing row, with its guard and the states it starts from. */
export type ExistingRowClaim = {
  name: ClaimTransition;
  spec: TransitionSpec & { guard: ClaimGuard; from: readonly LedgerStatus[] };
};

/** The claim transitions of an existing row, those for one downstream first (an SQL CASE takes the first match). */
export function claimsOfExistingRows(): ExistingRowClaim[] {
  const out: ExistingRowClaim[] = [];
  for (const name of TRANSITION_NAMES) {
    const spec: TransitionSpec = TRANSITIONS[name];
    if (spec.by === 'claim' && spec.guard && spec.from !== 'absent') {
      out.push({ name: name as ClaimTransition, spec: { ...spec, guard: spec.guard, from: spec.from } });
    }
  }
  return out.sort((a, b) => Number(a.spec.downstream === undefined) - Number(b.spec.downstream === undefined));
}

/** Audit event types that a ledger transition makes (their ids depend only on key, epoch, type and step). */
export const TRANSITION_EVENTS: ReadonlySet<string> = new Set(TRANSITION_NAMES.map((t) => TRANSITIONS[t].event));

/** The ledger status a transition event leaves behind, by event type (a `resolved` event: see its transition). */
export function statusAfterEvent(event: string): LedgerStatus | undefined {
  for (const name of TRANSITION_NAMES) {
    const spec: TransitionSpec = TRANSITIONS[name];
    if (spec.event === event && spec.event !== 'resolved') return spec.to;
  }
  return undefined;
}
