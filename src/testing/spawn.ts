/**
 * A commit-counting server in a child process, so that other processes (workers under test, a
 * demo's workers) share one. Its counters are read over HTTP (`GET /effects`) and faults are set
 * through `POST /control`.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { CommitCounterOptions } from './commit-counter.js';

export interface SpawnedCommitCounter {
  readonly url: string;
  readonly child: ChildProcess;
  /** SIGTERM and wait for exit. */
  stop(): Promise<void>;
}

/**
 * Runs cli.ts (beside this file) in a child process and resolves with its URL. The child exits
 * when this process dies (its stdin closes).
 */
export async function spawnCommitCounter(
  options: Pick<CommitCounterOptions, 'honourIdempotencyKey' | 'delayMs' | 'port'> = {},
): Promise<SpawnedCommitCounter> {
  const fromSources = import.meta.url.endsWith('.ts');
  const cli = fileURLToPath(new URL(fromSources ? './cli.ts' : './cli.js', import.meta.url));
  // From the TypeScript sources (tests, the demo) the child needs tsx; the built file runs as is.
  const args = fromSources ? ['--import', 'tsx', cli] : [cli];
  if (options.honourIdempotencyKey === false) args.push('--no-idempotency');
  if (options.delayMs !== undefined) args.push('--delay-ms', String(options.delayMs));
  if (options.port !== undefined) args.push('--port', String(options.port));
  const child = spawn(process.execPath, args, {
    stdio: ['pipe', 'pipe', 'inherit'],
    env: { ...process.env, COMMIT_COUNTER_EXIT_ON_STDIN_END: '1' },
  });
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  const url = await new Promise<string>((resolve, reject) => {
    const lines = createInterface({ input: child.stdout! });
    const fail = () => reject(new Error('commit counter child exited before printing its URL'));
    child.once('exit', fail);
    child.once('error', reject);
    lines.once('line', (line) => {
      child.off('exit', fail);
      lines.close();
      try {
        resolve((JSON.parse(line) as { url: string }).url);
      } catch (err) {
        reject(err);
      }
    });
  });
  return {
    url,
    child,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
}
