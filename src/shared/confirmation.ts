/**
 * A confirmation request as stored, and the moments of its life: what the wrapper's events carry
 * and the audit trail tells, below the confirm layer that asks, answers and sweeps them.
 */

/** The audit actions of a confirmation's life. */
export const CONFIRMATION_ACTIONS = {
  requested: 'confirmation.request',
  answered: 'confirmation.answer',
  timedOut: 'confirmation.timeout',
} as const;

export type ConfirmationEventKind = keyof typeof CONFIRMATION_ACTIONS;

export type ConfirmationStatus = 'pending' | 'approved' | 'denied' | 'timed_out';

/** A parked job that an answer wakes. */
export type ConfirmationWaiter = { queue: string; jobId: string };

/** A confirmation request as it is stored (details stay sealed). */
export type Confirmation = {
  /** `cf-<n>`: what `confirm <id>` takes. */
  id: string;
  operationKey: string;
  name: string;
  operation: string;
  reason: string;
  /** The sealed details, or null. */
  details: string | null;
  status: ConfirmationStatus;
  onTimeout: 'deny' | 'fail';
  timeoutMs: number;
  taskId: string | null;
  jobId: string | null;
  queue: string | null;
  /** The epoch of the attempt that asked first. */
  requestedEpoch: number;
  requestedAt: Date;
  expiresAt: Date;
  answeredAt: Date | null;
  answeredBy: string | null;
  answeredByType: 'user' | 'system' | null;
  reasonCode: string | null;
  comment: string | null;
  waiters: ConfirmationWaiter[];
  /** The database time the row was read at. */
  readAt: Date;
  /** Pending past its timeout (the next look at it records the timeout). */
  overdue: boolean;
};
