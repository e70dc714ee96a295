/**
 * Summarises a V8 sampling heap profile (as written by `BENCH_HEAP_PROFILE=dir npm run bench`):
 * the bytes a drain allocated per job, freed ones included, by package or file (this library's
 * src/ files, bullmq, ioredis, pg, node internals), and the top functions by bytes allocated in
 * their own frame and with everything they called synchronously. Allocation drives the young
 * generation's collections: compare variants by bytes per job.
 *
 * Run: `npx tsx bench/heap-summary.ts <file.heapprofile> <jobs in the drain> [top=30]`
 */
import { readFileSync } from 'node:fs';
import { bucket } from './lib/profile-bucket.js';
import { printTable } from './lib/table.js';

type HeapNode = {
  callFrame: { functionName: string; url: string; lineNumber: number };
  selfSize: number;
  children: HeapNode[];
};

function main(): void {
  const [file, jobsArg, topArg] = process.argv.slice(2);
  const jobs = Number(jobsArg);
  if (!file || !(jobs > 0)) throw new Error('usage: tsx bench/heap-summary.ts <file.heapprofile> <jobs> [top]');
  const top = Number(topArg ?? 30);
  const { head } = JSON.parse(readFileSync(file, 'utf8')) as { head: HeapNode };
  const label = ({ functionName, url, lineNumber }: HeapNode['callFrame']) =>
    `${functionName || '(anonymous)'} ${url ? `${bucket(url, functionName)}:${lineNumber + 1}` : ''}`.trim();
  const self = new Map<string, number>();
  const inclusive = new Map<string, number>();
  const buckets = new Map<string, number>();
  const add = (m: Map<string, number>, k: string, v: number) => m.set(k, (m.get(k) ?? 0) + v);
  let total = 0;
  // Returns the bytes under `node`; a function counts once per stack however often it recurs.
  const walk = (node: HeapNode, onStack: ReadonlySet<string>): number => {
    const l = label(node.callFrame);
    add(self, l, node.selfSize);
    add(buckets, bucket(node.callFrame.url, node.callFrame.functionName), node.selfSize);
    total += node.selfSize;
    const below = new Set(onStack).add(l);
    let sum = node.selfSize;
    for (const child of node.children) sum += walk(child, below);
    if (!onStack.has(l)) add(inclusive, l, sum);
    return sum;
  };
  walk(head, new Set());
  const show = (title: string, m: Map<string, number>, n: number) => {
    console.log(`\n${title}`);
    printTable(
      ['B/job', '%', 'where'],
      [...m]
        .sort((a, b) => b[1] - a[1])
        .slice(0, n)
        .map(([k, v]) => [(v / jobs).toFixed(0), ((100 * v) / total).toFixed(1), k]),
      { allRight: true },
    );
  };
  console.log(`${file}: ${(total / jobs).toFixed(0)} B allocated per job (sampled)`);
  show('By package / file (own frames)', buckets, 30);
  show('Top functions by bytes in their own frame', self, top);
  show('Top functions with what they called', inclusive, top);
}

main();
