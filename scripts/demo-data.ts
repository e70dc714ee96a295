import { Redis } from 'ioredis';
import pg from 'pg';

/** Where one demo run keeps its data: a Postgres schema and a BullMQ prefix named by the run's id. */
export type DemoPlace = { id: string; schema: string; prefix: string };

export function demoPlace(id: string): DemoPlace {
  if (!/^[0-9a-f]{6}$/.test(id))
    throw new Error(`a demo id is 6 hex digits (the one --keep printed), not ${JSON.stringify(id)}`);
  return { id, schema: `bqi_demo_${id}`, prefix: `{bqi-demo-${id}}` };
}

/** Drops the run's schema and deletes its Redis keys (scanned, never KEYS on a shared server). */
export async function removeDemoData(place: DemoPlace, databaseUrl: string, redisUrl: string): Promise<void> {
  const admin = new pg.Client({ connectionString: databaseUrl });
  await admin.connect();
  try {
    await admin.query(`drop schema if exists ${place.schema} cascade`);
  } finally {
    await admin.end();
  }
  const redis = new Redis(redisUrl);
  try {
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `${place.prefix}*`, 'COUNT', 1000);
      cursor = next;
      if (keys.length > 0) await redis.del(...keys);
    } while (cursor !== '0');
  } finally {
    await redis.quit();
  }
}
