import { defineConfig } from 'vitest/config';

/**
 * The tests in tiers, one folder each, run one tier after the other (`npm test` runs them all; a
 * script per tier in package.json runs one, `.ci/run` runs the packaging tier as a step of its own):
 *
 * - test/unit: no service at all (pure functions, docs and the layout of the code).
 * - test/integration: Postgres, Redis and BullMQ workers inside the test process. Each file has a
 *   schema and a prefix of its own, so two files run side by side.
 * - test/processes: files that start OS processes (workers, the CLI, the operations process, the
 *   demo), private servers (Postgres, PgBouncer, a Redis cluster), faults (SIGKILL, a skewed
 *   clock, a failover).
 * - test/packaging: `npm pack`, then an install of the tarball with its peers from the registry.
 *
 * The tier of a file is its folder, never its contents. A test file left at the root of test/ runs
 * with the integration tier (it may use the services; it starts no process of its own, or belongs
 * in test/processes), so a new file is never silently left out of a run.
 */
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
      { test: { ...shared, name: 'unit', include: ['test/unit/**/*.test.ts'], maxWorkers: 2 } },
      {
        test: {
          ...shared,
          name: 'integration',
          include: ['test/integration/**/*.test.ts', 'test/*.test.ts'],
          maxWorkers: 2,
          sequence: { groupOrder: 1 },
        },
      },
      {
        test: {
          ...shared,
          name: 'processes',
          include: ['test/processes/**/*.test.ts'],
          // Alone, one file at a time: their children are timed in hundreds of milliseconds (leases
          // of 600 ms, BullMQ stall checks every 300 ms, a SIGKILL at a mark, a failover under
          // load), and on 2 cores two such files starve each other's children (a child's start-up
          // then takes many times as long, a lease expires under a live worker). One file at a
          // time leaves a core to its children.
          maxWorkers: 1,
          sequence: { groupOrder: 2 },
          // A bound on a hang only: a test of several children waits for each of their steps (ten
          // CLI runs took over 120 s on a machine running two suites at once).
          testTimeout: 300_000,
        },
      },
      {
        test: {
          ...shared,
          name: 'packaging',
          include: ['test/packaging/**/*.test.ts'],
          // Alone: `npm install` from the registry and `tsc` over a fresh application take both
          // cores and the network for a minute; beside another file it only makes both slower.
          maxWorkers: 1,
          sequence: { groupOrder: 3 },
          testTimeout: 120_000,
        },
      },
    ],
  },
});
