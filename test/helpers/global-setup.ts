import type { TestProject } from 'vitest/node';
import { services } from '../../scripts/services.js';
import { buildForChildren, CHILD_BUILD_ENV, type ChildBuild } from './child-build.js';

declare module 'vitest' {
  export interface ProvidedContext {
    databaseUrl: string;
    redisUrl: string;
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
  return async () => {
    build?.remove();
    await svc.stop();
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
