import { performance } from 'node:perf_hooks';

/**
 * Runs `op` for items 0..count-1 with `concurrency` loops pulling from a shared counter.
 * Returns operations per second. After the first error the loops stop pulling, and it is rethrown
 * once every loop has finished (so nothing is left running against a schema about to be dropped).
 * With `until`, the loops stop pulling once it returns true (count may then be Infinity): the rate
 * is of the operations started.
 */
export async function drive(
  count: number,
  concurrency: number,
  op: (i: number) => Promise<void>,
  until?: () => boolean,
): Promise<number> {
  let next = 0;
  let failure: { error: unknown } | undefined;
  const loop = async () => {
    while (!failure && next < count && !until?.()) {
      const i = next++;
      try {
        await op(i);
      } catch (error) {
        failure ??= { error };
      }
    }
  };
  const started = performance.now();
  await Promise.all(Array.from({ length: Math.min(concurrency, count) }, loop));
  const seconds = (performance.now() - started) / 1000;
  if (failure) throw failure.error;
  return next / seconds;
}
