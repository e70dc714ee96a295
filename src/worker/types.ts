import type { Job } from 'bullmq';
import type { Kysely, Transaction } from 'kysely';
import type { IdentifierStorer } from '../audit/stored-identifier.js';
import type { ConfirmationDecision, ConfirmRequest } from '../confirm/types.js';
import type { IdempotencyInProgressError } from '../errors/errors.js';
import type { IdempotencyError } from '../errors/idempotency-error.js';
import type { IdempotencyKey } from '../keys/idempotency-key.js';
import type { AttemptLedger } from '../ledger/postgres-ledger.js';
import type { ClaimOutcome } from '../ledger/types.js';
import type { IdempotencyObserver } from '../observability/observer.js';
import type { Operation } from '../operation/operation.js';
import type { RetryJobOptions, WorkerTiming } from '../operation/retry-window.js';
import type { RedactionPolicy } from '../redaction/define-policy.js';
import type { Keyring } from '../sealing/keyring.js';
import type { Logger } from '../shared/logger.js';
import type { AuditSink } from '../shared/wrapper-event.js';

export type { Logger } from '../shared/logger.js';
export type { AuditSink, WrapperEvent, WrapperEventType } from '../shared/wrapper-event.js';

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
  /**
   * Fires when the lease or BullMQ's lock is lost, or the job is cancelled: stop and throw. Made
   * on first read, through the context's prototype: `ctx.signal` and `const { signal } = ctx`
   * work; a spread copy `{ ...ctx }` leaves it out.
   */
  readonly signal: AbortSignal;
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
  /**
   * Asks a person before a side effect that needs a yes. The first call records the request in
   * Postgres (once per operation key and `name`: every retry, redelivery and worker meets the same
   * one), tells it to the audit trail (`pending_confirmation`), gives the lease back without
   * recording anything and parks the job as a delayed job (no attempt used) until the answer
   * wakes it or `recheckEvery` passes. Code before it runs again when the job resumes: put side
   * effects there in {@link ProcessorContext.step}, which replays them. Once answered it returns
   * the answer, the same on every later attempt; an unanswered request times out on the database
   * clock (`onTimeout: 'deny'` returns a denial, `'fail'` fails the operation with
   * `IDEMPOTENCY_CONFIRMATION_TIMED_OUT`). Let the `DelayedError` it throws while waiting propagate.
   *
   * @example
   * const answer = await ctx.confirm({ name: 'large-payment', reason: `charge ${input.amount} cents`, timeout: '24h', onTimeout: 'deny' });
   * if (!answer.approved) throw new ConfirmationDeniedError(answer);
   */
  confirm(request: ConfirmRequest): Promise<ConfirmationDecision>;
};

/** The processor a user writes: the validated input and a context holding the lease. */
export type IdempotentProcessor<I, R, DB = unknown> = (input: I, ctx: ProcessorContext<DB>) => Promise<R>;

export type WithIdempotencyOptions<DB = unknown> = {
  /** The ledger (a `PostgresLedger`, or anything with what an attempt asks of one). */
  ledger: AttemptLedger;
  /**
   * Seals what is kept: results (ledger and BullMQ's `returnvalue`), step results, error text
   * (ledger, `failedReason`, `stacktrace`) and declared sensitive input; keys the fingerprints.
   * Every worker and operator that must read them needs the same keys.
   */
  keyring: Keyring;
  /** Audit sink; events are dropped when none is given. */
  audit?: AuditSink;
  /**
   * The policy task, job and step ids and queue names are kept under wherever the wrapper stores
   * or tells them (the ledger's `task_id`, `job_id`, `step_id`, `queue`, confirmations, log
   * lines): in clear when they match an identifier format, else as the keyed reference the audit
   * trail holds. Give the audit emitter's policy; `createIdempotency` gives its own.
   * @defaultValue the built-in policy keyed from `keyring` (`keyring.refKeys()`)
   */
  identifierPolicy?: RedactionPolicy;
  /** Where the wrapper tells what the audit trail does not: one `warn` line per failed attempt (code, class, key, epoch, attempt, how to open the stored copy), and more. */
  logger?: Logger;
  /**
   * Adds to each failed attempt's `warn` line the error's own message, its causes and its first
   * stack frame, as the value scanners leave them (`fetch failed [cause: … ENOTFOUND api.example]`),
   * so a developer reads the cause in the terminal. The scanners are a second line of defence:
   * text they do not recognise (a name, a street address) is logged as it is, so leave it off
   * where logs are kept. Without it the line tells the code and class only; `originalError(err)`
   * and `inspect --decrypt` reach the rest either way.
   * @defaultValue false
   */
  logErrorText?: boolean;
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
  /**
   * Metrics and spans: `createIdempotencyMetrics()`, `createIdempotencyTracing()`, both with
   * `combineObservers()`, or your own. It sees claims, phases and events, never input or results.
   */
  observer?: IdempotencyObserver;
};

// ---- Inside the worker: what the phases of one attempt hand each other. ----

/** The checked configuration of one wrapped processor, shared by every phase of its attempts. */
export type RunnerSettings<DB = unknown> = {
  readonly op: Operation;
  readonly options: WithIdempotencyOptions<DB>;
  readonly keyring: Keyring;
  /** Who holds the leases this process takes. */
  readonly owner: string;
  /** Where `ctx.tx` opens its transactions. */
  readonly db: Kysely<DB>;
  /** How long a job waits (delayed) before it looks again at a key in progress elsewhere. */
  readonly pollMs: number;
  /** Task, job and step ids and queue names as the ledger, confirmations and logs keep them (see `identifierAsStored`). */
  readonly ids: IdentifierStorer;
};

/** BullMQ's counters of a job as the attempt started; every event of the attempt carries them. */
export type AttemptFacts = { attemptsMade: number; attemptsStarted: number; stalledCounter: number };

/**
 * What one claim is about: the job, the key claimed and, for a step, the operation it belongs to.
 * The operation's scope and each of its steps' scopes share the job, token and facts.
 */
export type AttemptScope = {
  job: Job;
  token: string | undefined;
  key: IdempotencyKey;
  /** The bounded key string of `key`. */
  k: string;
  taskId: string | undefined;
  facts: AttemptFacts;
  /** For a step: the operation's bounded key. */
  parentK?: string;
  /** For a step: its name. */
  stepId?: string;
};

/** Enough of a scope to report an event before the key is known (a job refused when resolved). */
export type EventScope = Pick<AttemptScope, 'job' | 'facts'> & Partial<AttemptScope>;

/** A claim that acquired the lease. */
export type Acquired = Extract<ClaimOutcome, { kind: 'acquired' }>;

/**
 * What an attempt does after its claim, for an operation and a step alike:
 * - `run`: the lease is ours: run the processor (or the step's function);
 * - `replay`: completed before: return the recorded result, run nothing;
 * - `wait`: another attempt holds the lease: the job waits as a delayed job and claims again;
 * - `refuse`: conflict, recorded failure or unknown outcome: nothing runs, `error` says why.
 */
export type ClaimDecision =
  | { kind: 'run'; claim: Acquired }
  | { kind: 'replay'; result: unknown }
  | { kind: 'wait'; retryAfterMs: number }
  | { kind: 'refuse'; error: IdempotencyError };

/** A completion's receipt: when it took effect (database time) and the result as recorded. */
export type Completed = { at: Date; result: unknown };

/** What an attempt learns from its processor's use of the context, read once the processor settles. */
export type ContextState = {
  /** `ctx.tx` committed: its value is the operation's result, whatever the processor does next. */
  recorded: Completed | undefined;
  /** `ctx.tx` could not reach the database: its writes and its completion did not commit together. */
  txUnreachable: unknown;
  /** A step found its key held by another attempt: the job waits, then runs again. */
  held: { scope: AttemptScope; error: IdempotencyInProgressError; retryAfterMs: number } | undefined;
  /** Tool decisions reported so far (`ctx.audit()`), for their order. */
  decisions: number;
};

/**
 * What a processor error means for the ledger:
 * - `wait`: BullMQ's own control flow (delayed, waiting, rate limited): release, rethrow as is;
 * - `terminal`: failed for good, nothing committed: record the failure, fail without retries;
 * - `retryable`: nothing committed, or the downstream dedupes by our key: release, BullMQ retries;
 * - `reconcile`: ask the reconcile hook what happened;
 * - `unknown`: the effect may have committed and cannot be checked: no unattended retry.
 */
export type ErrorClass = 'wait' | 'terminal' | 'retryable' | 'reconcile' | 'unknown';

/**
 * The signal a write stops retrying on, or what holds it (a lease keeper): read only when a write
 * failed, since making a keeper's signal costs an AbortController per attempt.
 */
export type SignalSource = AbortSignal | { readonly signal: AbortSignal };
