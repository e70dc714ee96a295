import type { Job } from 'bullmq';
import { RecordLostError, StaleEpochError } from '../errors/errors.js';
import { ERROR_CODES, IdempotencyError, type IdempotencyErrorDetails } from '../errors/idempotency-error.js';
import type { AttemptLedger } from '../ledger/postgres-ledger.js';
import { holdsJobLock } from '../shared/bullmq.js';

/** Why an attempt lost its lease. */
export type LeaseLostReason = IdempotencyErrorDetails['IDEMPOTENCY_LEASE_LOST']['reason'];

/**
 * The reason of an attempt's (or a step's) `signal` when it fired because the lease was lost:
 * taken over by another attempt, not renewed before it expired, or BullMQ's lock on the job lost.
 * `code` is `IDEMPOTENCY_LEASE_LOST`; `details.reason` (also `reason`) says which.
 */
export class LeaseLostError extends IdempotencyError<typeof ERROR_CODES.leaseLost> {
  constructor(details: IdempotencyErrorDetails['IDEMPOTENCY_LEASE_LOST'], message: string) {
    super(ERROR_CODES.leaseLost, message, details);
  }

  /** Which of the three ways the lease was lost. */
  get reason(): LeaseLostReason {
    return this.details.reason;
  }
}

/**
 * What a claim or a heartbeat returned: the lease's expiry and the time of the same statement,
 * both on the database clock. Their difference is the lease left when the statement ran.
 */
export type LeaseGrant = { readonly leaseExpiresAt: Date; readonly at: Date };

/** What a {@link LeaseKeeper} keeps, and what it watches besides the ledger. */
export type LeaseKeeperOptions = {
  ledger: AttemptLedger;
  /** The bounded key whose lease is kept. */
  key: string;
  /** The epoch the lease was granted under; a renewal under a later one finds the lease taken over. */
  epoch: number;
  /** The lease length each renewal asks for. */
  leaseMs: number;
  /**
   * The claim that acquired the lease (`{ leaseExpiresAt, at }`). A bare expiry counts as a fresh
   * lease of `leaseMs` (what a claim grants); it is never compared with a clock.
   */
  granted: LeaseGrant | Date;
  /** The job whose BullMQ lock is watched, with the worker's `token`. A step's keeper watches none: the operation's does. */
  job?: Job | undefined;
  token?: string | undefined;
  /** A signal the keeper's own signal follows: BullMQ's (job cancelled), or the operation keeper's for a step. */
  outer?: AbortSignal | undefined;
};

/** Shortest pause between two renewals, and before a retry. */
const MIN_TICK_MS = 20;
/** Renewals left unanswered at once (a frozen database): more would only take pool connections. */
const MAX_PENDING_RENEWALS = 2;

/** A monotonic clock: wall-clock steps and skew do not move it. */
const monotonic = (): number => performance.now();

/**
 * How long before the lease runs out the signal fires: a tenth of the lease (at least 20 ms,
 * at most 10 s), so the processor hears of it before another worker could take over.
 */
export function leaseMarginMs(leaseMs: number): number {
  return Math.min(10_000, Math.max(MIN_TICK_MS, Math.floor(leaseMs / 10)));
}

/**
 * Renews the ledger lease while a processor runs (every lease/3), and watches BullMQ's job lock.
 * The attempt's signal fires when the lease is taken over, cannot be renewed before it
 * expires, or BullMQ's lock on the job is lost (BullMQ then hands the job to another worker,
 * so this attempt stops renewing and lets the lease lapse: the other copy takes over, and this
 * attempt's late writes are fenced). The signal also follows BullMQ's own (job cancelled).
 *
 * The worker's wall clock decides nothing. Postgres says how much lease is left (`leaseExpiresAt
 * - at` of one statement, both its own `now()`); the keeper counts that down on the monotonic
 * clock from the moment it sent the statement (the database ran it later, so the lease ends no
 * earlier than the keeper thinks). Each renewal must answer within what is left minus the margin
 * (and within lease/3); a renewal that hangs counts as failed. A timer independent of the
 * renewals fires `lease_expired` a margin before the counted-down end, so a frozen database
 * still gets a decision.
 */
export class LeaseKeeper {
  /** Made on first use of `signal`: most processors never read it, and one costs microseconds per job. */
  private controller: AbortController | undefined;
  /** Why the attempt lost its lease, when that happened before anyone asked for the signal. */
  private reason: LeaseLostError | undefined;
  private renewTimer: NodeJS.Timeout | undefined;
  private expiryTimer: NodeJS.Timeout | undefined;
  /** When the lease ends at the latest, on the monotonic clock (conservative). */
  private expiresAt: number;
  private readonly intervalMs: number;
  private readonly marginMs: number;
  private pending = 0;
  /** Why the last renewal failed, for the `lease_expired` message. */
  private lastFailure: string | undefined;
  private stopped = false;
  /** A renewal found the claim's row gone (or at a lower epoch): renewals stop, see `renew`. */
  private recordLost = false;
  /** The listener on `outer`, made with the signal: most attempts never read the signal. */
  private onOuterAbort: (() => void) | undefined;

  private readonly ledger: AttemptLedger;
  private readonly key: string;
  private readonly epoch: number;
  private readonly leaseMs: number;
  private readonly job: Job | undefined;
  private readonly token: string | undefined;
  private readonly outer: AbortSignal | undefined;

  constructor(options: LeaseKeeperOptions) {
    const { leaseMs, granted } = options;
    this.ledger = options.ledger;
    this.key = options.key;
    this.epoch = options.epoch;
    this.leaseMs = leaseMs;
    this.job = options.job;
    this.token = options.token;
    this.outer = options.outer;
    this.intervalMs = Math.max(MIN_TICK_MS, Math.floor(leaseMs / 3));
    this.marginMs = leaseMarginMs(leaseMs);
    // The claim was sent before this point; the time it took is not known here, so it is not counted.
    this.expiresAt = monotonic() + (granted instanceof Date ? leaseMs : remainingOf(granted));
    this.armExpiry();
    this.schedule(this.intervalMs);
  }

  /**
   * Aborts when the lease is lost (the reason is a LeaseLostError) or BullMQ's own signal aborts
   * (job cancelled; its reason). Created on first read; one read after the fact is already aborted.
   */
  get signal(): AbortSignal {
    if (!this.controller) {
      this.controller = new AbortController();
      if (this.reason) this.controller.abort(this.reason);
      else if (this.outer?.aborted) this.controller.abort(this.outer.reason);
      else if (this.outer && !this.stopped) {
        // One listener, removed at stop(), rather than AbortSignal.any(): this runs for every job.
        this.onOuterAbort = () => this.controller?.abort(this.outer?.reason);
        this.outer.addEventListener('abort', this.onOuterAbort, { once: true });
      }
    }
    return this.controller.signal;
  }

  get lost(): LeaseLostError | undefined {
    return this.reason;
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.renewTimer);
    clearTimeout(this.expiryTimer);
    if (this.onOuterAbort) this.outer?.removeEventListener('abort', this.onOuterAbort);
    this.onOuterAbort = undefined;
  }

  /** When the signal fires unless a renewal answers first. */
  private get firesAt(): number {
    return this.expiresAt - this.marginMs;
  }

  private schedule(delayMs: number): void {
    if (this.stopped) return;
    this.renewTimer = setTimeout(() => this.tick(), Math.max(0, delayMs));
    this.renewTimer.unref();
  }

  private armExpiry(): void {
    clearTimeout(this.expiryTimer);
    this.expiryTimer = setTimeout(() => this.onExpiry(), Math.max(0, this.firesAt - monotonic()));
    this.expiryTimer.unref();
  }

  private onExpiry(): void {
    // A stalled event loop makes this timer late: let answers already received land first.
    setImmediate(() => {
      if (this.stopped || this.recordLost) return;
      if (monotonic() < this.firesAt) {
        this.armExpiry();
        return;
      }
      const why = this.lastFailure ?? 'the database did not answer';
      this.lose(
        'lease_expired',
        `The lease of ${this.key} (epoch ${this.epoch}) could not be renewed before it expires: ${why}`,
      );
    });
  }

  private tick(): void {
    this.renewTimer = undefined;
    if (this.stopped || this.recordLost) return;
    const started = monotonic();
    const budget = Math.min(this.firesAt - started, this.intervalMs);
    if (budget <= 0) {
      // The expiry timer decides now; should a late answer extend the lease, renewals go on.
      this.schedule(MIN_TICK_MS);
      return;
    }
    if (this.pending >= MAX_PENDING_RENEWALS) {
      this.schedule(this.retryDelay());
      return;
    }
    this.pending++;
    let timer: NodeJS.Timeout | undefined;
    const answered = this.renew().finally(() => {
      this.pending--;
    });
    const timedOut = new Promise<'timeout'>((resolve) => {
      timer = setTimeout(() => resolve('timeout'), budget);
      timer.unref();
    });
    void Promise.race([answered, timedOut]).then((ok) => {
      clearTimeout(timer);
      if (ok === 'timeout') this.lastFailure = `a renewal did not answer within ${Math.round(budget)} ms`;
      this.schedule(ok === true ? started + this.intervalMs - monotonic() : this.retryDelay());
    });
  }

  /** After a failure: soon, but spread over what is left before the signal would fire. */
  private retryDelay(): number {
    return Math.max(MIN_TICK_MS, Math.min(this.intervalMs, (this.firesAt - monotonic()) / 3));
  }

  /**
   * Checks BullMQ's lock, then renews the lease. A late answer still counts: the lease it reports
   * is measured from when its statement was sent.
   */
  private async renew(): Promise<boolean> {
    try {
      if (!(await this.holdsBullLock())) {
        this.lose('lock_lost', `BullMQ's lock on job ${this.job?.id} was lost; another worker may run it`);
        return false;
      }
      if (this.stopped) return false;
      const sentAt = monotonic();
      const hb = await this.ledger.heartbeat(this.key, this.epoch, this.leaseMs);
      if (this.stopped) return false;
      const expiresAt = sentAt + remainingOf(hb);
      if (expiresAt > this.expiresAt) {
        this.expiresAt = expiresAt;
        this.armExpiry();
      }
      this.lastFailure = undefined;
      return true;
    } catch (err) {
      if (err instanceof RecordLostError) {
        // The row of the claim is gone (or its epoch went back): there is no lease left to keep
        // or to lose, and no later attempt fenced this one. The processor is left to finish, not
        // aborted (stopping it part-way would leave its effect no less ambiguous): its outcome
        // meets the lost record when it is written, and is recorded as such (see
        // AttemptRunner's handling of RecordLostError). Renewals and the expiry timer stop.
        this.recordLost = true;
        clearTimeout(this.expiryTimer);
        return false;
      }
      if (err instanceof StaleEpochError) {
        this.lose('lease_taken_over', `The lease of ${this.key} (epoch ${this.epoch}) was taken over`);
      } else {
        this.lastFailure = (err as Error).message;
      }
      return false;
    }
  }

  /** BullMQ's lock on the job is still this worker's (a step's keeper watches none: true). */
  private holdsBullLock(): Promise<boolean> {
    return this.job ? holdsJobLock(this.job, this.token) : Promise.resolve(true);
  }

  private lose(reason: LeaseLostError['reason'], message: string): void {
    if (this.stopped) return;
    this.stop();
    this.reason ??= new LeaseLostError({ reason, key: this.key, epoch: this.epoch }, message);
    this.controller?.abort(this.reason);
  }
}

/** The lease left when the statement ran, on the database clock alone. */
function remainingOf(g: LeaseGrant): number {
  return g.leaseExpiresAt.getTime() - g.at.getTime();
}
