/**
 * Postgres and Redis for the demo and scripts: DATABASE_URL / REDIS_URL when set, otherwise
 * containers started with testcontainers (needs Docker).
 */
export type Services = { databaseUrl: string; redisUrl: string; stop(): Promise<void> };

export async function services(): Promise<Services> {
  const stops: (() => Promise<unknown>)[] = [];
  let databaseUrl = process.env.DATABASE_URL;
  let redisUrl = process.env.REDIS_URL;
  if (!databaseUrl || !redisUrl) {
    process.stderr.write('DATABASE_URL/REDIS_URL not set: starting Postgres 16 and Redis 7 with testcontainers...\n');
  }
  if (!databaseUrl) {
    const { PostgreSqlContainer } = await import('@testcontainers/postgresql');
    // The test suite opens 100 connections at once in one case.
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
  return {
    databaseUrl,
    redisUrl,
    stop: async () => {
      for (const stop of stops) await stop();
    },
  };
}
