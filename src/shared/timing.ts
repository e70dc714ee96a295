// Timing helpers: the one capped exponential backoff every retry loop of the library uses, and a
// pause that an abort cuts short. (How a job waits as a delayed job is BullMQ's: see bullmq.ts.)

/** `baseMs · 2^n`, at most `capMs`: the step of a capped exponential backoff after `n` failures. */
export function backoffStep(n: number, baseMs: number, capMs: number): number {
  return Math.min(capMs, baseMs * 2 ** Math.min(n, 30));
}

/**
 * A wait of the capped exponential backoff after `n` failures: its step less up to `spread` of it
 * at random (0.2: between 80% and all of the step), so processes that failed together spread out.
 */
export function backoffDelay(n: number, o: { baseMs: number; capMs: number; spread: number }): number {
  const step = backoffStep(n, o.baseMs, o.capMs);
  return Math.ceil(step * (1 - Math.random() * o.spread));
}

export const DEFAULT_BACKOFF_BASE_MS = 100;
export const DEFAULT_BACKOFF_CAP_MS = 30_000;

/**
 * Capped exponential backoff over a process's consecutive failures, with jitter (half to all of
 * the step). Failures that arrive together (every job in flight when the database went away) are
 * one step: the count rises only once the previous step's wait has passed, so a hundred jobs that
 * fail at once wait ~200 ms, not the cap. Any success resets it. Monotonic clock.
 */
export class Backoff {
  private failures = 0;
  private lastStep = Number.NEGATIVE_INFINITY;

  constructor(
    private readonly baseMs = DEFAULT_BACKOFF_BASE_MS,
    private readonly capMs = DEFAULT_BACKOFF_CAP_MS,
  ) {}

  /** Records a failure; returns how long to wait before asking again (between half and all of the step). */
  next(): number {
    const now = performance.now();
    if (now - this.lastStep >= backoffStep(this.failures, this.baseMs, this.capMs)) {
      this.failures++;
      this.lastStep = now;
    }
    return backoffDelay(this.failures, { baseMs: this.baseMs, capMs: this.capMs, spread: 0.5 });
  }

  /** The other side answered. */
  reset(): void {
    this.failures = 0;
    this.lastStep = Number.NEGATIVE_INFINITY;
  }

  get consecutiveFailures(): number {
    return this.failures;
  }
}

/** Waits `ms`, or less when `signal` aborts. */
export function pause(ms: number, signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
  });
}
