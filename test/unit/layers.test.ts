import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, posix, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/**
 * The folders of src/ in layers, lowest first: a folder imports only from folders of lower
 * layers (never up, never across to a folder of its own layer). Derived from the code: each
 * folder sits one layer above the highest folder it needs. The files at the root of src/
 * (index.ts, internal.ts, types.ts) assemble the public API and may import anything.
 * `../migrations` is the folder of migrations beside src/ (with `migrate`, which runs them): its
 * imports are checked as a folder of src/'s, and an import that leaves src/ for any other folder
 * is refused. A folder inside a folder of src/ belongs to it, unless it has a layer of its own:
 * `scanners/pino` (the pino integration runs a whole redaction policy, so it sits above
 * `redaction`, which scans with the value scanners of `scanners`, below it).
 */
const LAYERS: readonly (readonly string[])[] = [
  ['errors'],
  ['shared', 'db', 'fingerprint'],
  ['keys', 'scanners'],
  ['ledger', 'redaction'],
  ['sealing', 'audit', 'scanners/pino'],
  ['intents', '../migrations'],
  ['operation'],
  ['config', 'confirm'],
  ['jobs', 'observability', 'console'],
  ['worker', 'ops'],
  ['cli', 'runtime'],
  ['testing', 'entries'],
];

/**
 * Imports that still break the layers, each with why it is not undone yet. The test fails on
 * any other, and on an entry here that no longer exists (delete it then).
 */
const KNOWN: Record<string, string> = {};

const SRC = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'src');
/** The TypeScript files below `dir`, as paths from src/ (`worker/w.ts`, `../migrations/index.ts`). */
const tsFiles = (dir: string) =>
  readdirSync(join(SRC, dir), { recursive: true, encoding: 'utf8' })
    .map((f) => posix.join(dir, f.split('\\').join('/')))
    .filter((f) => f.endsWith('.ts'));
const FILES = [...tsFiles('.'), ...tsFiles('../migrations')];

/** Static imports and re-exports (type-only too: they tie the modules as much) and dynamic imports. */
const IMPORT =
  /(?:^|\n)\s*(?:import|export)\s[^'";]*?['"](\.\.?\/[^'"]+)['"]|\bimport\(\s*['"](\.\.?\/[^'"]+)['"]\s*\)/g;

type Edge = { from: string; to: string };

function importsOf(text: string, from: string): Edge[] {
  return [...text.matchAll(IMPORT)].map((m) => ({
    from,
    // From src/, a path back into src/ (`../src/ledger/x.ts`, from migrations/) is the folder's own.
    to: posix
      .normalize(posix.join(posix.dirname(from), m[1] ?? m[2] ?? ''))
      .replace(/^\.\.\/src\//, '')
      .replace(/\.js$/, '.ts'),
  }));
}

/**
 * A file's folder of src/ (`worker`, or `scanners/pino`: a folder inside one with a layer of its
 * own), or beside src/ (`../migrations`); undefined at the root of src/.
 */
function folderOf(file: string): string | undefined {
  const parts = file.split('/');
  if (parts[0] === '..') return `../${parts[1]}`;
  if (parts.length > 2 && layerOf.has(`${parts[0]}/${parts[1]}`)) return `${parts[0]}/${parts[1]}`;
  return parts.length < 2 ? undefined : parts[0];
}

const layerOf = new Map(LAYERS.flatMap((folders, i) => folders.map((f) => [f, i] as const)));

/** `file -> file` for each import that goes up or across, outside its own folder. */
function violations(edges: Edge[]): string[] {
  return edges
    .filter((e) => {
      const a = folderOf(e.from);
      const b = folderOf(e.to);
      // A folder beside src/ that has no layer (test/, scripts/, …) is above every layer: refused.
      if (a === undefined || b === undefined || a === b) return false;
      return (layerOf.get(b) ?? Number.POSITIVE_INFINITY) >= (layerOf.get(a) ?? Number.NEGATIVE_INFINITY);
    })
    .map((e) => `${e.from} -> ${e.to}`);
}

/** The import cycles between files: each strongly connected set of more than one file (or a self-import). */
function cycles(edges: Edge[]): string[][] {
  const next = new Map<string, string[]>();
  for (const e of edges) next.set(e.from, [...(next.get(e.from) ?? []), e.to]);
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (v: string) => {
    index.set(v, index.size);
    low.set(v, index.get(v)!);
    stack.push(v);
    onStack.add(v);
    for (const w of next.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) !== index.get(v)) return;
    const set: string[] = [];
    for (let w = stack.pop(); w !== undefined; w = w === v ? undefined : stack.pop()) {
      onStack.delete(w);
      set.push(w);
    }
    if (set.length > 1 || (next.get(v) ?? []).includes(v)) found.push(set.sort());
  };
  for (const v of next.keys()) if (!index.has(v)) visit(v);
  return found;
}

/** Edges written as `from -> to`, for the tests of the rules themselves. */
const edgesOf = (...lines: string[]): Edge[] =>
  lines.map((l) => {
    const [from = '', to = ''] = l.split(' -> ');
    return { from, to };
  });

const EDGES = FILES.flatMap((f) => importsOf(readFileSync(join(SRC, f), 'utf8'), f));

describe('layers of src/', () => {
  it('reads the imports of every file (static, type-only, re-exports, dynamic)', () => {
    expect(FILES.length).toBeGreaterThan(150);
    expect(EDGES.length).toBeGreaterThan(500);
    const sample = importsOf(
      "import type { A } from '../a/x.js';\nexport { B } from './y.js';\nconst c = await import('../c/z.js');",
      'worker/w.ts',
    );
    expect(sample.map((e) => e.to)).toEqual(['a/x.ts', 'worker/y.ts', 'c/z.ts']);
    expect(FILES).toContain('../migrations/index.ts');
    const beside = importsOf(
      "import { a } from '../src/ledger/t.js';\nimport { b } from './index.js';",
      '../migrations/0001.ts',
    );
    expect(beside.map((e) => e.to)).toEqual(['ledger/t.ts', '../migrations/index.ts']);
  });

  it("docs/layout.md's Layout section names every folder of src/, and no other", () => {
    const readme = readFileSync(join(SRC, '..', 'docs/layout.md'), 'utf8');
    const start = readme.indexOf('\n## Layout\n');
    const end = readme.indexOf('\n## ', start + 1);
    const section = readme.slice(start, end < 0 ? undefined : end);
    const named = [...section.matchAll(/`src\/([\w/-]+)\/`/g)].map((m) => m[1] as string);
    const dirs = readdirSync(SRC, { recursive: true, withFileTypes: true })
      .filter((d) => d.isDirectory())
      .map((d) => posix.join(relative(SRC, d.parentPath).split('\\').join('/'), d.name));
    expect(start).toBeGreaterThan(0);
    expect(dirs.filter((d) => !named.includes(d))).toEqual([]);
    expect(named.filter((d) => !dirs.includes(d))).toEqual([]);
    // Listed in the order of the layers, lowest first.
    const tops = named.filter((d) => !d.includes('/'));
    expect(tops).toEqual([...tops].sort((a, b) => (layerOf.get(a) ?? 0) - (layerOf.get(b) ?? 0)));
  });

  it('every folder of src/ has a layer', () => {
    const folders = [...new Set(FILES.map(folderOf).filter((f) => f !== undefined))].sort();
    expect(folders.filter((f) => !layerOf.has(f))).toEqual([]);
    expect([...layerOf.keys()].filter((f) => !folders.includes(f))).toEqual([]);
  });

  it('no folder imports from its own layer or above, but for the known ones', () => {
    const found = violations(EDGES);
    expect(found.filter((v) => !(v in KNOWN))).toEqual([]);
    expect(Object.keys(KNOWN).filter((k) => !found.includes(k))).toEqual([]);
  });

  it('the rule catches an import up and one across', () => {
    expect(
      violations(
        edgesOf(
          'ledger/a.ts -> worker/b.ts',
          'jobs/a.ts -> observability/b.ts',
          'worker/a.ts -> ledger/b.ts',
          'index.ts -> cli/program.ts',
          'db/migrate.ts -> ../migrations/index.ts',
          '../migrations/0001.ts -> ledger/transitions.ts',
          'runtime/r.ts -> ../migrations/migrate.ts',
          'ledger/a.ts -> ../test/helpers/h.ts',
          'redaction/a.ts -> scanners/pino/pino.ts',
          'scanners/pino/pino.ts -> redaction/walker.ts',
          'scanners/a.ts -> redaction/b.ts',
        ),
      ),
    ).toEqual([
      'ledger/a.ts -> worker/b.ts',
      'jobs/a.ts -> observability/b.ts',
      'db/migrate.ts -> ../migrations/index.ts',
      'ledger/a.ts -> ../test/helpers/h.ts',
      'redaction/a.ts -> scanners/pino/pino.ts',
      'scanners/a.ts -> redaction/b.ts',
    ]);
  });

  it('no import cycle between files', () => {
    expect(cycles(EDGES)).toEqual([]);
    expect(
      cycles(
        edgesOf(
          'ledger/a.ts -> ledger/b.ts',
          'ledger/b.ts -> ledger/c.ts',
          'ledger/c.ts -> ledger/a.ts',
          'ledger/c.ts -> errors/e.ts',
        ),
      ),
    ).toEqual([['ledger/a.ts', 'ledger/b.ts', 'ledger/c.ts']]);
  });
});
