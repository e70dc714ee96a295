/**
 * Counts the public names of the package: for each entry of package.json's `exports` (its
 * TypeScript source), the runtime values a program can import and all exported names, types
 * included. `npx tsx scripts/count-exports.ts` prints a table and, last, one JSON line.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';
import ts from 'typescript';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const pkg = JSON.parse(readFileSync(`${ROOT}package.json`, 'utf8')) as {
  exports: Record<string, string | { import: string }>;
};

/** The TypeScript source of a built entry: dist/src/x.js → src/x.ts. */
function sourceOf(built: string): string {
  return `${ROOT}${built.replace(/^\.\/dist\//, '').replace(/\.js$/, '.ts')}`;
}

const entries = Object.entries(pkg.exports)
  .filter(([, target]) => typeof target !== 'string')
  .map(([path, target]) => ({ path, file: sourceOf((target as { import: string }).import) }));

const program = ts.createProgram(
  entries.map((e) => e.file),
  {
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    target: ts.ScriptTarget.ES2022,
    noEmit: true,
    skipLibCheck: true,
  },
);
const checker = program.getTypeChecker();

const rows: { entry: string; values: number; names: number }[] = [];
for (const e of entries) {
  const source = program.getSourceFile(e.file);
  const symbol = source && checker.getSymbolAtLocation(source);
  const names = symbol ? checker.getExportsOfModule(symbol).length : 0;
  const values = Object.keys(await import(pathToFileURL(e.file).href)).length;
  rows.push({ entry: e.path, values, names });
}
for (const r of rows)
  console.log(`${r.entry.padEnd(18)} ${String(r.values).padStart(4)} values ${String(r.names).padStart(4)} names`);
console.log(JSON.stringify(rows));
