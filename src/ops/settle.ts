import { untilAborted } from '../config/abort.js';

export type Settled = 'done' | 'timeout' | { error: Error };

/** How `p` settled within `ms`: done, failed (its error), or still pending at the deadline. */
export function settleWithin(p: Promise<unknown>, ms: number): Promise<Settled> {
  return Promise.race([
    p.then(
      () => 'done' as const,
      (err: unknown) => ({ error: err instanceof Error ? err : new Error(String(err)) }),
    ),
    untilAborted(AbortSignal.timeout(ms)).catch(() => 'timeout' as const),
  ]);
}
