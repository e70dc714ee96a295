import type { Confirmation, ConfirmationEventKind } from './confirmation.js';

/**
 * What the wrapper reports and the audit trail receives: shared by the worker (which emits),
 * the audit emitter (which implements the sink) and the derivation of events from the ledger.
 */
/** Ledger transitions and decisions the wrapper reports, for the audit trail. */
export type WrapperEventType =
  | 'claimed'
  | 'takeover'
  | 'replayed'
  | 'conflict'
  | 'in_progress'
  | 'completed'
  | 'failed'
  | 'released'
  | 'unknown'
  | 'missing_key'
  | 'invalid_input'
  | 'stale_completion'
  | 'reconciled'
  | 'invalidated'
  | 'resolved'
  | 'swept'
  | 'decision'
  | 'confirmation';

export type WrapperEvent = {
  type: WrapperEventType;
  operation: string;
  /** Bounded key string, when known (a step's own key for step events). */
  key?: string;
  /** For step events: the key of the operation the step belongs to. */
  parentKey?: string;
  epoch?: number;
  /** Database time of the transition, when the ledger reported one. */
  at?: Date;
  decision: 'allow' | 'deny' | 'pending_confirmation';
  reasonCode?: string;
  jobId?: string;
  queue?: string;
  taskId?: string;
  stepId?: string;
  attemptsMade: number;
  attemptsStarted: number;
  stalledCounter: number;
  /** For `decision` events: the processor's own tool decision. */
  details?: Record<string, unknown>;
  /** For `decision` events: its order within the attempt. */
  seq?: number;
  /** For `confirmation` events (`ctx.confirm`): which moment of which stored request. */
  confirmation?: { kind: ConfirmationEventKind; request: Confirmation };
};

/**
 * Where the wrapper sends its events (the audit emitter implements it). `emit` may return a
 * promise that resolves once the event is durable; the wrapper waits for it only for tool
 * decisions (`ctx.audit()`) and confirmation requests (`ctx.confirm()`), never for its own transition events, which the ledger records.
 * (A union, so that a sink whose `emit` returns anything else, as `(e) => events.push(e)`, still fits.)
 */
export type AuditSink = { emit(event: WrapperEvent): void } | { emit(event: WrapperEvent): Promise<void> };
