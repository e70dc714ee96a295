import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { isAbsolute, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CHILD_BUILD_ENV } from './child-build.js';

export const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/**
 * The file a child process runs for `script` (a `.ts` path, absolute or relative to the repository
 * root): its transpiled `.js` in this run's child build (see child-build.ts) when there is one.
 */
export function builtScript(script: string): string | undefined {
  const dir = process.env[CHILD_BUILD_ENV];
  if (!dir) return undefined;
  const rel = relative(ROOT, resolve(ROOT, script));
  if (rel.startsWith('..') || isAbsolute(rel) || !rel.endsWith('.ts')) return undefined;
  const built = join(dir, `${rel.slice(0, -3)}.js`);
  return existsSync(built) ? built : undefined;
}

/**
 * How long a child may take to say it is ready. Readiness is an event (a line on stdout; an early
 * exit fails at once); the deadline only bounds a hang, and a loaded machine can take long.
 */
export const CHILD_READY_TIMEOUT_MS = 60_000;

/**
 * `node` arguments that run `script`: the built JavaScript when there is a child build, else the
 * TypeScript source through tsx (a test file run outside vitest's global setup).
 */
export function nodeArgs(script: string): string[] {
  const built = builtScript(script);
  return built ? ['--enable-source-maps', built] : ['--import', 'tsx', script];
}

/** The `execArgv` and file for a BullMQ sandboxed processor written in TypeScript. */
export function sandboxedProcessor(script: string): { file: string; execArgv: string[] } {
  const built = builtScript(script);
  return built ? { file: built, execArgv: ['--enable-source-maps'] } : { file: script, execArgv: ['--import', 'tsx'] };
}

/** Variables of the parent that must not leak into a child's configuration. */
const OWN = /^(DATABASE_URL|REDIS_URL|LOG_LEVEL|BQI_.*)$/;

/** The parent's environment without its configuration, plus `vars` (an undefined value unsets). */
export function childEnv(vars: Record<string, string | undefined>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!OWN.test(k)) env[k] = v;
  for (const [k, v] of Object.entries(vars)) {
    if (v === undefined) delete env[k];
    else env[k] = v;
  }
  return env;
}

export type Finished = { code: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string };

/** Runs `script` (built, see {@link nodeArgs}) with `args` from the repository root and collects its output. */
export function runTs(
  script: string,
  args: string[],
  env: NodeJS.ProcessEnv,
  timeoutMs = 60_000,
): Promise<Finished & { ms: number }> {
  const started = Date.now();
  const child = spawnTs(script, args, env);
  return finished(child, timeoutMs, `${script} ${args.join(' ')}`).then((f) => ({ ...f, ms: Date.now() - started }));
}

export function spawnTs(script: string, args: string[], env: NodeJS.ProcessEnv): ChildProcess & Collected {
  const child = spawn(process.execPath, [...nodeArgs(script), ...args], {
    cwd: ROOT,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  return collect(child);
}

/** Collects a spawned child's stdout and stderr as they arrive (`child.out`, `child.err`). */
export function collect(child: ChildProcess): ChildProcess & Collected {
  const c = child as ChildProcess & Collected;
  c.out = '';
  c.err = '';
  c.stdout?.setEncoding('utf8').on('data', (d: string) => {
    c.out += d;
  });
  c.stderr?.setEncoding('utf8').on('data', (d: string) => {
    c.err += d;
  });
  return c;
}

export type Collected = { out: string; err: string };

/** Resolves when the child has exited and its streams are closed; kills it after `timeoutMs`. */
export function finished(child: ChildProcess & Collected, timeoutMs: number, what: string): Promise<Finished> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${what} did not exit within ${timeoutMs} ms\nstdout: ${child.out}\nstderr: ${child.err}`));
    }, timeoutMs);
    child.once('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout: child.out, stderr: child.err });
    });
  });
}
