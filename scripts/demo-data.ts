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

/** What a run left: its schema, its keys (how many), and whether the run is still in progress. */
export type DemoLeftover = { place: DemoPlace; schema: boolean; keys: number; running: boolean };

const ID = /^bqi_demo_([0-9a-f]{6})$/;
const KEY_ID = /^\{bqi-demo-([0-9a-f]{6})\}/;

/**
 * Every demo run's data in the database and Redis, found by the demo's naming (schema
 * `bqi_demo_<id>`, keys under `{bqi-demo-<id>}`), each with whether its run is still in progress
 * (its `aliveKey` is there).
 */
export async function demoLeftovers(
  databaseUrl: string,
  redisUrl: string,
  aliveKey: (place: DemoPlace) => string,
): Promise<DemoLeftover[]> {
  const found = new Map<string, DemoLeftover>();
  const entry = (id: string) => {
    let e = found.get(id);
    if (!e) {
      e = { place: demoPlace(id), schema: false, keys: 0, running: false };
      found.set(id, e);
    }
    return e;
  };
  const admin = new pg.Client({ connectionString: databaseUrl });
  await admin.connect();
  try {
    const { rows } = await admin.query<{ name: string }>(
      `select nspname as name from pg_namespace where nspname like 'bqi\\_demo\\_%' order by 1`,
    );
    for (const r of rows) {
      const id = ID.exec(r.name)?.[1];
      if (id) entry(id).schema = true;
    }
  } finally {
    await admin.end();
  }
  const redis = new Redis(redisUrl);
  try {
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', '{bqi-demo-*', 'COUNT', 1000);
      cursor = next;
      for (const k of keys) {
        const id = KEY_ID.exec(k)?.[1];
        if (id) entry(id).keys++;
      }
    } while (cursor !== '0');
    for (const e of found.values()) e.running = (await redis.exists(aliveKey(e.place))) === 1;
  } finally {
    await redis.quit();
  }
  return [...found.values()].sort((a, b) => a.place.id.localeCompare(b.place.id));
}
