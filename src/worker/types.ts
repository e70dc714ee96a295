import type { Job } from 'bullmq';
import type { Kysely, Transaction } from 'kysely';
import type { IdempotencyKey } from '../keys/idempotency-key.js';
import type { PostgresLedger } from '../ledger/postgres-ledger.js';
import type { RetryJobOptions, WorkerTiming } from '../operation/retry-window.js';
import type { Keyring } from '../sealing/keyring.js';

/** A pino-compatible logger; the library logs nothing when none is given. */
export type Logger = {
  debug(obj: object, msg?: string): void;
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
};

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
  | 'decision';

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
};

/**
 * Where the wrapper sends its events (the audit emitter implements it). `emit` may return a
 * promise that resolves once the event is durable; the wrapper waits for it only for tool
 * decisions (`ctx.audit()`), never for its own transition events, which the ledger records.
 * (A union, so that a sink whose `emit` returns anything else, as `(e) => events.push(e)`, still fits.)
 */
export type AuditSink = { emit(event: WrapperEvent): void } | { emit(event: WrapperEvent): Promise<void> };

/**
 * A tool decision a processor records through `ctx.audit()`. Fields past their bounds are
 * normalised, not refused: text that breaks its grammar or bound becomes a keyed reference,
 * counters become whole numbers (each change listed in the event's redaction receipt). The whole
 * event, as JSON, must stay under the emitter's `maxEventBytes` (256 KiB by default): summarise
 * large content in `details` rather than passing it.
 */
export type DecisionInput = {
  action: string;
  /** Who decided. @defaultValue `'agent'` and the operation name */
  actorType?: 'system' | 'user' | 'agent';
  actorId?: string;
  decision: 'allow' | 'deny' | 'pending_confirmation';
  reasonCode?: string;
  resourceType?: string;
  resourceId?: string;
  details?: Record<string, unknown>;
};

/** What a step's function gets. */
export type StepContext = { idempotencyKey: string; key: IdempotencyKey; epoch: number; signal: AbortSignal };

/** The context handed to a wrapped processor on an attempt that holds the lease. */
export type ProcessorContext<DB = unknown> = {
  /** The bounded key string: pass it to a downstream API (Idempotency-Key header) on every attempt. */
  idempotencyKey: string;
  key: IdempotencyKey;
  /** Fencing epoch of this attempt. */
  epoch: number;
  /** True when this attempt took over the expired lease of a crashed or stalled one. */
  takeover: boolean;
  attemptsMade: number;
  attemptsStarted: number;
  stalledCounter: number;
  taskId: string | undefined;
  /** Fires when the lease or BullMQ's lock is lost, or the job is cancelled: stop and throw. */
  signal: AbortSignal;
  job: Job;
  token: string | undefined;
  /**
   * Runs `fn` in a database transaction in which the ledger completion also commits: the
   * value `fn` returns is the operation's result, recorded atomically with `fn`'s writes.
   * Exactly once for effects that are writes to the same Postgres.
   */
  tx<T>(fn: (trx: Transaction<DB>) => Promise<T>): Promise<T>;
  /** Protects one side effect of a multi-step job with its own ledger row: a resumed job skips finished steps. */
  step<T>(name: string, fn: (step: StepContext) => Promise<T>): Promise<T>;
  /**
   * Records a tool decision (allow / deny / pending_confirmation) in the audit trail. The promise
   * resolves once the decision is durable: its audit batch accepted by Redis or written to the
   * Postgres outbox, about one batch interval (`maxDelayMs`, 50 ms by default) later; from then on
   * a crash of this process does not lose it. It rejects with `AuditEventNotDurableError` (`code`
   * `AUDIT_EVENT_TOO_LARGE`, `AUDIT_EVENT_INVALID` or `AUDIT_EVENT_LOST`) when it is not in the
   * trail. Without an audit sink it resolves at once. Not awaiting it is allowed (fire-and-forget:
   * a rejection is not reported as unhandled).
   *
   * @example
   * await ctx.audit({ action: 'tool.delete_bucket', decision: 'deny', reasonCode: 'POLICY_PROTECTED' });
   */
  audit(event: DecisionInput): Promise<void>;
};

export type WithIdempotencyOptions<DB = unknown> = {
  ledger: PostgresLedger;
  /**
   * Seals what is kept: results (ledger and BullMQ's `returnvalue`), step results, error text
   * (ledger, `failedReason`, `stacktrace`) and declared sensitive input; keys the fingerprints.
   * Every worker and operator that must read them needs the same keys.
   */
  keyring: Keyring;
  /** Audit sink; events are dropped when none is given. */
  audit?: AuditSink;
  logger?: Logger;
  /** A kysely instance of the same database for `ctx.tx`, typed with your tables. @defaultValue the ledger's */
  db?: Kysely<DB>;
  /** The worker's lock and stall settings, to check the lease and the retry window. @defaultValue BullMQ's defaults */
  worker?: WorkerTiming;
  /** The queue's default job options, checked against retention at wrap time. */
  jobOptions?: RetryJobOptions;
  /**
   * How long a job that finds its operation in progress elsewhere waits (as a delayed job,
   * using no attempt) before it looks again; never past the holder's lease.
   * @defaultValue lease / 10, between 50 and 1000 ms
   */
  inProgressPollMs?: number;
  /** Identifies this process in lease records. @defaultValue `hostname:pid` */
  owner?: string;
};
