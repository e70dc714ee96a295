import type { TestProject } from 'vitest/node';
import { services } from '../../scripts/services.js';

declare module 'vitest' {
  export interface ProvidedContext {
    databaseUrl: string;
    redisUrl: string;
  }
}

/**
 * Uses DATABASE_URL / REDIS_URL when set (CI, a machine with the services running);
 * otherwise starts Postgres 16 and Redis 7 with testcontainers (a laptop with Docker).
 */
export default async function setup(project: TestProject) {
  const svc = await services();
  project.provide('databaseUrl', svc.databaseUrl);
  project.provide('redisUrl', svc.redisUrl);
  return () => svc.stop();
}
