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

/** True when `err` is `target` or wraps it (a processor may wrap the error the library gave it). */
export function causedBy(err: unknown, target: unknown): boolean {
  for (let e: unknown = err, depth = 0; depth < 5; e = (e as Error).cause, depth++) {
    if (e === target) return true;
    if (!(e instanceof Error)) return false;
  }
  return false;
}
