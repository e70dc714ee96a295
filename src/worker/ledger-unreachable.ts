import { types } from 'node:util';
import { ERROR_CODES, IdempotencyError } from '../errors/idempotency-error.js';

/**
 * A ledger write or claim that could not reach Postgres. Internal: the attempt runner turns it
 * into a delayed job (no BullMQ attempt used) and never hands it to BullMQ; `cause` is the
 * driver's error.
 */
export class LedgerUnreachableError extends IdempotencyError<typeof ERROR_CODES.ledgerUnreachable> {
  readonly what: string;

  constructor(what: string, cause: unknown) {
    super(ERROR_CODES.ledgerUnreachable, `the ledger could not be reached (${what})`, { what }, { cause });
    this.what = what;
  }
}

/**
 * The {@link LedgerUnreachableError} in `err`'s cause chain (a processor may wrap a step's). Never
 * throws: a Proxy whose traps throw, or a `cause` getter that does, has none.
 */
export function ledgerUnreachable(err: unknown): LedgerUnreachableError | undefined {
  try {
    for (let e: unknown = err, depth = 0; !types.isProxy(e) && e instanceof Error && depth < 5; e = e.cause, depth++) {
      if (e instanceof LedgerUnreachableError) return e;
    }
  } catch {
    // not ours: ours are plain errors
  }
  return undefined;
}

export const DEFAULT_BACKOFF_BASE_MS = 100;
export const DEFAULT_BACKOFF_CAP_MS = 30_000;

/**
 * Capped exponential backoff over a process's consecutive database failures, with jitter.
 * Failures that arrive together (every job in flight when the database went away) are one
 * step: the count rises only once the previous step's wait has passed, so a hundred jobs that
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
    if (now - this.lastStep >= this.stepMs()) {
      this.failures++;
      this.lastStep = now;
    }
    const step = this.stepMs();
    return Math.ceil(step / 2 + Math.random() * (step / 2));
  }

  /** The database answered. */
  reset(): void {
    this.failures = 0;
    this.lastStep = Number.NEGATIVE_INFINITY;
  }

  get consecutiveFailures(): number {
    return this.failures;
  }

  private stepMs(): number {
    return Math.min(this.capMs, this.baseMs * 2 ** Math.min(this.failures, 30));
  }
}

/** The process's one backoff for the ledger: every runner of this process shares it. */
export const ledgerBackoff = new Backoff();
