import type { Job } from 'bullmq';
import { StaleEpochError } from '../errors/errors.js';
import type { PostgresLedger } from '../ledger/postgres-ledger.js';

/** Why an attempt's signal fired. */
export class LeaseLostError extends Error {
  constructor(
    readonly reason: 'lease_taken_over' | 'lease_expired' | 'lock_lost',
    message: string,
  ) {
    super(message);
    this.name = 'LeaseLostError';
  }
}

type RedisGet = { get(key: string): Promise<string | null> };
/** What a job's queue exposes (BullMQ 5: `client`; BullMQ 6: `backend.client`). */
type LockView = { client?: Promise<RedisGet>; backend?: { client?: Promise<RedisGet> }; toKey(type: string): string };

/**
 * Renews the ledger lease while a processor runs (every lease/3), and watches BullMQ's job lock.
 * The attempt's signal fires when the lease is taken over, cannot be renewed before it
 * expires, or BullMQ's lock on the job is lost (BullMQ then hands the job to another worker,
 * so this attempt stops renewing and lets the lease lapse: the other copy takes over, and this
 * attempt's late writes are fenced). The signal also follows BullMQ's own (job cancelled).
 */
export class LeaseKeeper {
  /** Made on first use of `signal`: most processors never read it, and one costs microseconds per job. */
  private controller: AbortController | undefined;
  /** Why the attempt lost its lease, when that happened before anyone asked for the signal. */
  private reason: LeaseLostError | undefined;
  private readonly timer: NodeJS.Timeout;
  private leaseExpiresAt: number;
  private busy = false;
  private stopped = false;
  private listening = false;
  private readonly onOuterAbort = () => this.controller?.abort(this.outer?.reason);

  constructor(
    private readonly ledger: PostgresLedger,
    private readonly key: string,
    private readonly epoch: number,
    private readonly leaseMs: number,
    leaseExpiresAt: Date,
    private readonly job: Job | undefined,
    private readonly token: string | undefined,
    private readonly outer: AbortSignal | undefined,
  ) {
    this.leaseExpiresAt = leaseExpiresAt.getTime();
    this.timer = setInterval(() => void this.tick(), Math.max(20, Math.floor(leaseMs / 3)));
    this.timer.unref();
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
        this.outer.addEventListener('abort', this.onOuterAbort, { once: true });
        this.listening = true;
      }
    }
    return this.controller.signal;
  }

  get lost(): LeaseLostError | undefined {
    return this.reason;
  }

  stop(): void {
    this.stopped = true;
    clearInterval(this.timer);
    if (this.listening) this.outer?.removeEventListener('abort', this.onOuterAbort);
    this.listening = false;
  }

  private async tick(): Promise<void> {
    if (this.busy || this.stopped) return;
    this.busy = true;
    try {
      if (!(await this.holdsBullLock())) {
        this.lose('lock_lost', `BullMQ's lock on job ${this.job?.id} was lost; another worker may run it`);
        return;
      }
      const hb = await this.ledger.heartbeat(this.key, this.epoch, this.leaseMs);
      this.leaseExpiresAt = hb.leaseExpiresAt.getTime();
    } catch (err) {
      if (err instanceof StaleEpochError) {
        this.lose('lease_taken_over', `The lease of ${this.key} (epoch ${this.epoch}) was taken over`);
      } else if (Date.now() >= this.leaseExpiresAt) {
        // Renewal keeps failing (database unreachable) and the lease has run out: stop work.
        this.lose('lease_expired', `The lease of ${this.key} expired while renewal failed: ${(err as Error).message}`);
      }
    } finally {
      this.busy = false;
    }
  }

  private async holdsBullLock(): Promise<boolean> {
    const queue = (this.job as unknown as { queue?: LockView } | undefined)?.queue;
    const clientPromise = queue?.backend?.client ?? queue?.client;
    // A sandboxed job has no queue here: BullMQ's lock is not visible, the ledger lease still fences.
    if (!clientPromise || typeof queue?.toKey !== 'function' || !this.token || !this.job?.id) return true;
    const client = await clientPromise;
    const lock = await client.get(`${queue.toKey(this.job.id)}:lock`);
    return lock === this.token;
  }

  private lose(reason: LeaseLostError['reason'], message: string): void {
    this.stop();
    this.reason ??= new LeaseLostError(reason, message);
    this.controller?.abort(this.reason);
  }
}
