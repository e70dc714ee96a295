/**
 * Summarises a V8 .cpuprofile (as written by `BENCH_CPU_PROFILE=dir npm run bench`): where the
 * sampled time went, by package (bullmq, pg, zod, this library's src/ files, node internals,
 * GC, idle), and the top functions by self time and by inclusive (synchronous) time. Inclusive
 * time stops at async boundaries: what runs after an `await` is a new stack.
 *
 * Run: `npx tsx bench/profile-summary.ts <file.cpuprofile> [top=25]`
 */
import { readFileSync } from 'node:fs';
import { bucket } from './lib/profile-bucket.js';
import { printTable } from './lib/table.js';

type ProfileNode = {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
};
type Profile = { nodes: ProfileNode[]; samples: number[]; timeDeltas: number[]; startTime: number; endTime: number };

function main(): void {
  const [file, topArg] = process.argv.slice(2);
  if (!file) throw new Error('usage: tsx bench/profile-summary.ts <file.cpuprofile> [top]');
  const top = Number(topArg ?? 25);
  const profile = JSON.parse(readFileSync(file, 'utf8')) as Profile;
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const label = (n: ProfileNode) => {
    const { functionName, url, lineNumber } = n.callFrame;
    const where = url ? `${bucket(url, functionName)}:${lineNumber + 1}` : '';
    return `${functionName || '(anonymous)'} ${where}`.trim();
  };

  const self = new Map<string, number>();
  const inclusive = new Map<string, number>();
  const buckets = new Map<string, number>();
  let total = 0;
  profile.samples.forEach((id, i) => {
    const dt = profile.timeDeltas[i] ?? 0;
    total += dt;
    const node = byId.get(id)!;
    const l = label(node);
    self.set(l, (self.get(l) ?? 0) + dt);
    const b = bucket(node.callFrame.url, node.callFrame.functionName);
    buckets.set(b, (buckets.get(b) ?? 0) + dt);
    const seen = new Set<string>();
    for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
      const name = label(byId.get(cur)!);
      if (seen.has(name)) continue;
      seen.add(name);
      inclusive.set(name, (inclusive.get(name) ?? 0) + dt);
    }
  });
  const show = (title: string, m: Map<string, number>, n: number) => {
    console.log(`\n${title}`);
    const top = [...m].sort((a, b) => b[1] - a[1]).slice(0, n);
    printTable(
      ['ms', '%', 'where'],
      top.map(([k, v]) => [(v / 1000).toFixed(0), ((100 * v) / total).toFixed(1), k]),
      { allRight: true },
    );
  };
  console.log(`${file}: ${(total / 1000).toFixed(0)} ms sampled`);
  show('By package / file (self time)', buckets, 40);
  show('Top functions by self time', self, top);
  show('Top functions by inclusive synchronous time', inclusive, top);
}

main();
