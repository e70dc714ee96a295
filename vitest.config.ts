import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

/**
 * Files that start OS processes: Node children (workers, the CLI, the operations process, migrate
 * and backfill children, sandboxed processors), private servers (Postgres, PgBouncer, a Redis
 * cluster) or npm. On 2 cores two of them at once starve each other's children (a child's start-up
 * then takes many times as long), so they run one file at a time, after the in-process files; the
 * children's CPU has the other core. A file is one of them when it imports what starts processes.
 */
const STARTS_PROCESSES =
  /helpers\/(spawn|crash-worker|clock-worker|private-postgres|pgbouncer|redis-cluster)\.js|node:child_process|workerForkOptions|spawnDownstream/;
const TEST_DIR = fileURLToPath(new URL('./test', import.meta.url));
const PROCESSES = readdirSync(TEST_DIR)
  .filter((f) => f.endsWith('.test.ts') && STARTS_PROCESSES.test(readFileSync(join(TEST_DIR, f), 'utf8')))
  .map((f) => `test/${f}`);

const shared = {
  testTimeout: 60_000,
  hookTimeout: 120_000,
  pool: 'forks',
} as const;

export default defineConfig({
  test: {
    // Runs once per run (root project): services, and the JavaScript the child processes run.
    globalSetup: ['test/helpers/global-setup.ts'],
    projects: [
      {
        test: { ...shared, name: 'in-process', include: ['test/**/*.test.ts'], exclude: PROCESSES, maxWorkers: 2 },
      },
      {
        test: {
          ...shared,
          name: 'processes',
          include: PROCESSES,
          maxWorkers: 1,
          sequence: { groupOrder: 1 },
          // A bound on a hang only: a test of several children waits for each of their steps.
          testTimeout: 120_000,
        },
      },
    ],
  },
});
