/**
 * A promise that rejects with the signal's reason once it aborts, for `Promise.race` with
 * `AbortSignal.timeout(ms)`: a deadline with no timer to clear (the race keeps the late
 * rejection handled, and the signal's timer does not hold the process open).
 *
 * @example
 * await Promise.race([redis.ping(), untilAborted(AbortSignal.timeout(5_000))]);
 */
export function untilAborted(signal: AbortSignal): Promise<never> {
  return new Promise<never>((_, reject) => {
    if (signal.aborted) reject(signal.reason);
    else signal.addEventListener('abort', () => reject(signal.reason), { once: true });
  });
}
