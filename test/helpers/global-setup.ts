import type { TestProject } from 'vitest/node';

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
  const stops: (() => Promise<unknown>)[] = [];
  let databaseUrl = process.env.DATABASE_URL;
  let redisUrl = process.env.REDIS_URL;
  if (!databaseUrl) {
    const { PostgreSqlContainer } = await import('@testcontainers/postgresql');
    const pg = await new PostgreSqlContainer('postgres:16-alpine')
      .withCommand(['postgres', '-c', 'max_connections=300'])
      .start();
    databaseUrl = pg.getConnectionUri();
    stops.push(() => pg.stop());
  }
  if (!redisUrl) {
    const { RedisContainer } = await import('@testcontainers/redis');
    const redis = await new RedisContainer('redis:7-alpine')
      .withCommand(['redis-server', '--maxmemory-policy', 'noeviction', '--appendonly', 'yes'])
      .start();
    redisUrl = redis.getConnectionUrl();
    stops.push(() => redis.stop());
  }
  project.provide('databaseUrl', databaseUrl);
  project.provide('redisUrl', redisUrl);
  return async () => {
    for (const stop of stops) await stop();
  };
}
