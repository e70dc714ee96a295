import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';
import { services } from '../../scripts/services.js';
import { buildForChildren, CHILD_BUILD_ENV, type ChildBuild } from './child-build.js';
import { REQUIRE_ALL, SKIPS_FILE } from './machine.js';

declare module 'vitest' {
  export interface ProvidedContext {
    databaseUrl: string;
    redisUrl: string;
    /** Postgres' max_connections (undefined when it could not be read). */
    maxConnections: number | undefined;
  }
}

/** One case opens 100 connections at once while other files run beside it. */
const WANTED_CONNECTIONS = 300;

/**
 * Uses DATABASE_URL / REDIS_URL when set (CI); otherwise Postgres and Redis on their default
 * local ports when they answer, else containers started with testcontainers; else prints what is
 * needed and exits 1 (see scripts/services.ts). Each test file then makes its own schema and prefix.
 */
export default async function setup(project: TestProject) {
  const build = await childBuild();
  if (build) project.onTestsRerun(() => build.rebuild());
  const svc = await services();
  if (svc.maxConnections !== undefined && svc.maxConnections < WANTED_CONNECTIONS) {
    process.stderr.write(
      `note: Postgres' max_connections is ${svc.maxConnections}; the concurrency tests want ${WANTED_CONNECTIONS} ` +
        `(alter system set max_connections = ${WANTED_CONNECTIONS}, then restart Postgres)\n`,
    );
  }
  project.provide('databaseUrl', svc.databaseUrl);
  project.provide('redisUrl', svc.redisUrl);
  project.provide('maxConnections', svc.maxConnections);
  // The test workers inherit it: each skip for a missing need writes its reason there.
  const skips = join(mkdtempSync(join(tmpdir(), 'bqi-skips-')), 'skips.txt');
  process.env[SKIPS_FILE] = skips;
  return async () => {
    build?.remove();
    await svc.stop();
    reportSkips(skips);
  };
}

/**
 * Child processes of the tests run built JavaScript (see child-build.ts); the workers find it
 * through an environment variable they inherit. Without a build they fall back to tsx, slower.
 */
async function childBuild(): Promise<ChildBuild | undefined> {
  try {
    const build = await buildForChildren();
    process.env[CHILD_BUILD_ENV] = build.dir;
    return build;
  } catch (err) {
    process.stderr.write(`note: no child build (${String(err)}); child processes run through tsx\n`);
    return undefined;
  }
}

/** The tests this machine could not run, one line each, after the run (none under `.ci/run`). */
function reportSkips(file: string): void {
  let lines: string[] = [];
  try {
    lines = [...new Set(readFileSync(file, 'utf8').split('\n').filter(Boolean))];
  } catch {
    // no skip was written
  }
  rmSync(join(file, '..'), { recursive: true, force: true });
  if (lines.length === 0) return;
  process.stderr.write(
    `\nskipped on this machine (${REQUIRE_ALL}=1, as .ci/run sets it, runs them):\n${lines.map((l) => `  - ${l}`).join('\n')}\n`,
  );
}
