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

/** Where the wrapper sends its events (the audit emitter implements it). */
export type AuditSink = { emit(event: WrapperEvent): void };

/** A tool decision a processor records through `ctx.audit()`. */
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
  /** Records a tool decision (allow / deny / pending_confirmation) in the audit trail. */
  audit(event: DecisionInput): void;
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
