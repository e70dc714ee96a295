/** SQLSTATE of a deadlock that Postgres broke by failing one of its statements. */
export const DEADLOCK_DETECTED = '40P01';

/** True when Postgres failed the statement to break a deadlock: it wrote nothing, and may simply run again. */
export const isDeadlock = (err: unknown): boolean => (err as { code?: unknown } | null)?.code === DEADLOCK_DETECTED;

/**
 * Runs `statement`, and again while Postgres fails it to break a deadlock, `runs` times in all;
 * `onRetry` is told of each run again. Any other error, or the last deadlock, is thrown.
 */
export async function retryingDeadlock<T>(statement: () => Promise<T>, runs: number, onRetry?: () => void): Promise<T> {
  for (let run = 1; ; run++) {
    try {
      return await statement();
    } catch (err) {
      if (!isDeadlock(err) || run >= runs) throw err;
      onRetry?.();
    }
  }
}
