/**
 * The V8 sampling profilers over one drain (not its fill): when BENCH_CPU_PROFILE names a
 * directory, each drain writes `<dir>/<name>.cpuprofile`, which `npx tsx bench/profile-summary.ts`
 * summarises; when BENCH_HEAP_PROFILE names one, each drain writes `<dir>/<name>.heapprofile`, a
 * sample of every allocation, those the collector has already freed included (one sample per
 * 1 KB allocated on average), which `npx tsx bench/heap-summary.ts` summarises.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import type { HeapProfiler } from 'node:inspector';
import { Session } from 'node:inspector/promises';
import { join } from 'node:path';

const PROFILE_DIR = process.env.BENCH_CPU_PROFILE;
const HEAP_DIR = process.env.BENCH_HEAP_PROFILE;

export async function startProfile(): Promise<Session | undefined> {
  if (!PROFILE_DIR && !HEAP_DIR) return undefined;
  const session = new Session();
  session.connect();
  if (PROFILE_DIR) {
    await session.post('Profiler.enable');
    await session.post('Profiler.setSamplingInterval', { interval: 200 });
    await session.post('Profiler.start');
  }
  if (HEAP_DIR) {
    // The two `include…` flags (V8's, not in Node's types) keep objects a collection has freed:
    // the drain's garbage is the point.
    const sampling: HeapProfiler.StartSamplingParameterType = Object.assign(
      { samplingInterval: 1024 },
      { includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true },
    );
    await session.post('HeapProfiler.startSampling', sampling);
  }
  return session;
}

export async function stopProfile(session: Session | undefined, name: string): Promise<void> {
  if (!session) return;
  if (PROFILE_DIR) {
    const { profile } = await session.post('Profiler.stop');
    mkdirSync(PROFILE_DIR, { recursive: true });
    writeFileSync(join(PROFILE_DIR, `${name}.cpuprofile`), JSON.stringify(profile));
  }
  if (HEAP_DIR) {
    const { profile } = await session.post('HeapProfiler.stopSampling');
    mkdirSync(HEAP_DIR, { recursive: true });
    writeFileSync(join(HEAP_DIR, `${name}.heapprofile`), JSON.stringify(profile));
  }
  session.disconnect();
}
