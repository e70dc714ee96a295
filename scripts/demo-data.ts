import type { ConnectionOptions, Queue } from 'bullmq';
import { Redis } from 'ioredis';
import pg from 'pg';
import { isPostgresQueueUrl, postgresQueueConnection } from '../src/shared/queue-backend.js';

/** Where one demo run keeps its data: a Postgres schema and a BullMQ prefix named by the run's id. */
export type DemoPlace = { id: string; schema: string; prefix: string };

export function demoPlace(id: string): DemoPlace {
  if (!/^[0-9a-f]{6}$/.test(id))
    throw new Error(`a demo id is 6 hex digits (the one --keep printed), not ${JSON.stringify(id)}`);
  return { id, schema: `bqi_demo_${id}`, prefix: `{bqi-demo-${id}}` };
}

/**
 * The prefix of the run's queues: its Redis prefix, or on BullMQ's PostgreSQL backend (a
 * `postgres://` queue URL) the schema of BullMQ's tables, `<schema>_q`.
 */
export function demoPrefix(place: DemoPlace, queueUrl: string): string {
  return isPostgresQueueUrl(queueUrl) ? `${place.schema}_q` : place.prefix;
}

/** BullMQ's connection for the queue URL: Redis, or BullMQ's PostgreSQL backend. */
export function demoConnection(queueUrl: string, prefix: string): ConnectionOptions {
  return isPostgresQueueUrl(queueUrl)
    ? postgresQueueConnection(queueUrl, prefix)
    : { url: queueUrl, maxRetriesPerRequest: null };
}

/** Where the queues keep their jobs, for the report. */
export const queueStore = (queueUrl: string) => (isPostgresQueueUrl(queueUrl) ? "BullMQ's tables" : 'Redis');

/** How many of the queues' stored records hold `text`: Redis keys under the prefix, or rows of BullMQ's tables. */
export async function recordsHolding(queueUrl: string, prefix: string, text: string): Promise<number> {
  if (isPostgresQueueUrl(queueUrl)) {
    const client = new pg.Client({ connectionString: queueUrl });
    await client.connect();
    try {
      const jobs = await client.query(`select 1 from ${prefix}.job j where strpos(j::text, $1) > 0`, [text]);
      const events = await client.query(`select 1 from ${prefix}.event e where strpos(e::text, $1) > 0`, [text]);
      return (jobs.rowCount ?? 0) + (events.rowCount ?? 0);
    } finally {
      await client.end();
    }
  }
  const redis = new Redis(queueUrl);
  let found = 0;
  try {
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000);
      cursor = next;
      for (const k of keys) {
        const type = await redis.type(k);
        const dump =
          type === 'hash' ? JSON.stringify(await redis.hgetall(k)) : type === 'string' ? await redis.get(k) : '';
        if (dump?.includes(text)) found++;
      }
    } while (cursor !== '0');
  } finally {
    await redis.quit();
  }
  return found;
}

/** Deletes every job of `q` from the store (a Redis that restarted without persistence); returns how many of `jobIds` were there. */
export async function loseJobs(queueUrl: string, q: Queue, jobIds: string[]): Promise<number> {
  if (isPostgresQueueUrl(queueUrl)) {
    const client = new pg.Client({ connectionString: queueUrl });
    await client.connect();
    try {
      const schema = (q.opts.connection as { schema: string }).schema;
      const gone = await client.query(`delete from ${schema}.job where queue = $1 returning id`, [q.name]);
      return gone.rows.filter((r) => jobIds.includes(r.id)).length;
    } finally {
      await client.end();
    }
  }
  const redis = new Redis(queueUrl);
  let lost = 0;
  try {
    for (const id of jobIds) lost += await redis.del(q.toKey(id));
    for (const k of await redis.keys(`${q.toKey('')}*`)) await redis.del(k);
  } finally {
    await redis.quit();
  }
  return lost;
}

/** Drops the run's schema and deletes its queues (Redis keys scanned, never KEYS on a shared server; or BullMQ's schema). */
export async function removeDemoData(place: DemoPlace, databaseUrl: string, redisUrl: string): Promise<void> {
  const admin = new pg.Client({ connectionString: databaseUrl });
  await admin.connect();
  try {
    await admin.query(`drop schema if exists ${place.schema} cascade`);
    if (isPostgresQueueUrl(redisUrl)) await admin.query(`drop schema if exists ${demoPrefix(place, redisUrl)} cascade`);
  } finally {
    await admin.end();
  }
  if (isPostgresQueueUrl(redisUrl)) return;
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
  // Queues on BullMQ's PostgreSQL backend live in the run's schemas: no keys, no alive marker.
  if (isPostgresQueueUrl(redisUrl)) return [...found.values()];
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
