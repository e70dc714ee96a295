/**
 * The V8 sampling profiler over one drain (not its fill), when BENCH_CPU_PROFILE names a
 * directory: each drain writes `<dir>/<name>.cpuprofile`, which `npx tsx bench/profile-summary.ts`
 * summarises.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { join } from 'node:path';

const PROFILE_DIR = process.env.BENCH_CPU_PROFILE;

export async function startProfile(): Promise<Session | undefined> {
  if (!PROFILE_DIR) return undefined;
  const session = new Session();
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.setSamplingInterval', { interval: 200 });
  await session.post('Profiler.start');
  return session;
}

export async function stopProfile(session: Session | undefined, name: string): Promise<void> {
  if (!session || !PROFILE_DIR) return;
  const { profile } = await session.post('Profiler.stop');
  session.disconnect();
  mkdirSync(PROFILE_DIR, { recursive: true });
  writeFileSync(join(PROFILE_DIR, `${name}.cpuprofile`), JSON.stringify(profile));
}
