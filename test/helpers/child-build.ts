/**
 * The JavaScript that test child processes run. A child started with `node --import tsx` compiles
 * every module it loads on start-up (seconds on a loaded machine, tens of seconds cold); the global
 * setup instead transpiles the sources children load once per run, with the same transform tsx
 * uses (esbuild, no type-checking: `tsc --noEmit` does that), into a fresh directory, and tells the
 * test workers where through {@link CHILD_BUILD_ENV}. `childCommand()` in spawn.ts maps a `.ts`
 * script to its built file there, or falls back to tsx when there is no build (a file imported
 * outside vitest) or the script is not part of it.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The variable holding the build directory (inherited by the test workers and their children). */
export const CHILD_BUILD_ENV = 'TEST_CHILD_BUILD_DIR';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** What child processes may load: the library, the process entry point, migrations, scripts, test helpers. */
const DIRS = ['src', 'jobs', 'migrations', 'scripts', 'test/helpers', 'test/fixtures'];

function sources(): string[] {
  const files: string[] = [];
  for (const dir of DIRS) {
    const abs = join(ROOT, dir);
    for (const entry of readdirSync(abs, { recursive: true, withFileTypes: true })) {
      if (entry.isFile() && entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts'))
        files.push(join(entry.parentPath, entry.name));
    }
  }
  return files;
}

export type ChildBuild = {
  dir: string;
  files: number;
  ms: number;
  /** Transpiles again into the same directory (watch mode: sources changed). */
  rebuild(): Promise<void>;
  remove(): void;
};

/**
 * Transpiles the child-loadable sources into a new temporary directory laid out like the
 * repository (`<dir>/src/cli/main.js` for `src/cli/main.ts`), with the package's package.json
 * (ESM, and the version the CLI prints) and a `node_modules` link to the repository's.
 */
export async function buildForChildren(): Promise<ChildBuild> {
  const started = performance.now();
  const dir = mkdtempSync(join(tmpdir(), 'bqi-child-build-'));
  try {
    const files = await transpile(dir);
    writeFileSync(join(dir, 'package.json'), readFileSync(join(ROOT, 'package.json')));
    symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'), 'dir');
    return {
      dir,
      files,
      ms: Math.round(performance.now() - started),
      rebuild: async () => void (await transpile(dir)),
      remove: () => rmSync(dir, { recursive: true, force: true }),
    };
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
}

async function transpile(dir: string): Promise<number> {
  // esbuild comes with tsx (it is what tsx runs); imported lazily so a missing one only fails the build.
  const { build } = await import('esbuild');
  const entryPoints = sources();
  await build({
    entryPoints,
    outdir: dir,
    outbase: ROOT,
    format: 'esm',
    platform: 'node',
    target: 'node20',
    bundle: false,
    sourcemap: 'linked',
    sourcesContent: false,
    logLevel: 'silent',
    tsconfig: join(ROOT, 'tsconfig.json'),
  });
  return entryPoints.length;
}
