/**
 * `npm run demo` interrupted: SIGTERM while its workers run ends every process it started and
 * removes the run's schema and Redis keys; `--clean` lists every run's data and removes what runs
 * no longer in progress left, leaving a run in progress alone. The leftovers are planted in a
 * database and a Redis of this file's own, so `--clean` never meets another run on the machine.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { Redis } from 'ioredis';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { demoPlace } from '../../scripts/demo-data.js';
import { aliveKey } from '../../scripts/demo-signals.js';
import { waitFor } from '../helpers/context.js';
import { freePort } from '../helpers/private-postgres.js';
import { childEnv, finished, runTs, spawnTs } from '../helpers/spawn.js';

const databaseUrl = inject('databaseUrl');
const redisUrl = inject('redisUrl');

/** A process as /proc tells it: parent, state, start time (a pid reused later has another). */
function stat(pid: number): { ppid: number; state: string; start: string } | undefined {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
    return { state: fields[0] as string, ppid: Number(fields[1]), start: fields[19] as string };
  } catch {
    return undefined;
  }
}

/** Every live descendant of `root`, with its command line and start time. */
function descendants(root: number): { pid: number; start: string; cmd: string }[] {
  const procs = readdirSync('/proc')
    .filter((d) => /^\d+$/.test(d))
    .map((d) => ({ pid: Number(d), s: stat(Number(d)) }))
    .filter((p) => p.s !== undefined);
  const found: { pid: number; start: string; cmd: string }[] = [];
  const parents = new Set([root]);
  for (let grew = true; grew; ) {
    grew = false;
    for (const p of procs) {
      if (parents.has(p.pid) || !p.s || !parents.has(p.s.ppid)) continue;
      parents.add(p.pid);
      let cmd = '';
      try {
        cmd = readFileSync(`/proc/${p.pid}/cmdline`, 'utf8').replaceAll('\0', ' ');
      } catch {}
      found.push({ pid: p.pid, start: p.s.start, cmd });
      grew = true;
    }
  }
  return found;
}

/** True while the process that had this pid and start time runs (a zombie has ended). */
function alive(p: { pid: number; start: string }): boolean {
  const s = stat(p.pid);
  return s !== undefined && s.start === p.start && s.state !== 'Z';
}

async function schemaExists(url: string, schema: string): Promise<boolean> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    return (await c.query('select 1 from pg_namespace where nspname = $1', [schema])).rowCount === 1;
  } finally {
    await c.end();
  }
}

async function keysUnder(url: string, prefix: string): Promise<string[]> {
  const r = new Redis(url);
  try {
    const found: string[] = [];
    let cursor = '0';
    do {
      const [next, keys] = await r.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000);
      cursor = next;
      found.push(...keys);
    } while (cursor !== '0');
    return found;
  } finally {
    await r.quit();
  }
}

describe('npm run demo, interrupted', () => {
  it('SIGTERM while its workers run: every process it started ends, its schema and keys are removed, exit 143', async () => {
    const demo = spawnTs('scripts/demo.ts', [], childEnv({ DATABASE_URL: databaseUrl, REDIS_URL: redisUrl }));
    const done = finished(demo, 120_000, 'the demo');
    try {
      // Its workers run: the first scenario is done and the worker process of its own is up.
      const worker = await waitFor(
        () =>
          demo.err.includes('✓')
            ? descendants(demo.pid as number).find((p) => p.cmd.includes('demo-worker'))
            : undefined,
        'the demo running its workers',
        90_000,
      );
      // The run's id: in its worker's arguments (its schema), and said on stderr.
      const id = /"schema":"bqi_demo_([0-9a-f]{6})"/.exec(worker?.cmd ?? '')?.[1] as string;
      expect(demo.err).toContain(`run ${id}: schema bqi_demo_${id}`);
      const place = demoPlace(id);
      const children = descendants(demo.pid as number);
      expect(children.length).toBeGreaterThan(0);
      expect(await schemaExists(databaseUrl, place.schema)).toBe(true);
      expect((await keysUnder(redisUrl, place.prefix)).length).toBeGreaterThan(0);

      demo.kill('SIGTERM');
      const end = await done;
      expect(end.code, end.stderr).toBe(143);
      expect(end.stderr).toContain(`removed schema ${place.schema} and the keys under ${place.prefix}`);
      await waitFor(() => children.every((p) => !alive(p)), 'every process the demo started ended', 5_000).catch(
        () => {},
      );
      expect(children.filter(alive).map((p) => p.cmd)).toEqual([]);
      expect(await schemaExists(databaseUrl, place.schema)).toBe(false);
      expect(await keysUnder(redisUrl, place.prefix)).toEqual([]);
    } finally {
      if (demo.exitCode === null && demo.signalCode === null) demo.kill('SIGKILL');
      await done.catch(() => {});
    }
  });
});

describe('npm run demo -- --clean', () => {
  let redisServer: ChildProcess | undefined;
  let ownRedis = '';
  let ownDatabase = '';
  const dbName = `bqi_demo_clean_${randomBytes(4).toString('hex')}`;

  beforeAll(async () => {
    const port = await freePort();
    redisServer = spawn(
      'redis-server',
      ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
      { stdio: 'ignore' },
    );
    ownRedis = `redis://127.0.0.1:${port}`;
    await waitFor(async () => {
      const r = new Redis(ownRedis, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
      r.on('error', () => {});
      try {
        await r.connect();
        return (await r.ping()) === 'PONG';
      } catch {
        return false;
      } finally {
        r.disconnect();
      }
    }, 'the private Redis');
    const admin = new pg.Client({ connectionString: databaseUrl });
    await admin.connect();
    await admin.query(`create database ${dbName}`);
    await admin.end();
    const url = new URL(databaseUrl);
    url.pathname = `/${dbName}`;
    ownDatabase = url.toString();
  });

  afterAll(async () => {
    redisServer?.kill('SIGKILL');
    const admin = new pg.Client({ connectionString: databaseUrl });
    await admin.connect();
    await admin.query(`drop database if exists ${dbName} with (force)`);
    await admin.end();
  });

  /** A run's data as an interrupted run leaves it: a schema with a table, keys under its prefix. */
  async function plant(id: string, running: boolean): Promise<void> {
    const place = demoPlace(id);
    const c = new pg.Client({ connectionString: ownDatabase });
    await c.connect();
    await c.query(`create schema ${place.schema}; create table ${place.schema}.idempotency_keys (k text)`);
    await c.end();
    const r = new Redis(ownRedis);
    await r.set(`${place.prefix}:charges-1:meta`, 'x');
    await r.set(`${place.prefix}:charges-1:id`, '7');
    if (running) await r.set(aliveKey(place), '1', 'PX', 60_000);
    await r.quit();
  }

  it('lists every run and removes the leftovers; a run in progress is left as it is', async () => {
    await plant('a1b2c3', false);
    await plant('d4e5f6', true);
    // Not the demo's naming: never touched.
    const r = new Redis(ownRedis);
    await r.set('{bqi-demo-other}:x', '1');
    await r.quit();

    const env = childEnv({ DATABASE_URL: ownDatabase, REDIS_URL: ownRedis });
    const cleaned = await runTs('scripts/demo.ts', ['--clean'], env, 60_000);
    expect(cleaned.code, cleaned.stderr).toBe(0);
    expect(cleaned.stdout).toContain('run a1b2c3: removed schema bqi_demo_a1b2c3, 2 keys under {bqi-demo-a1b2c3}');
    expect(cleaned.stdout).toMatch(/run d4e5f6: schema bqi_demo_d4e5f6, 3 keys under \{bqi-demo-d4e5f6\}: in progress/);
    expect(await schemaExists(ownDatabase, 'bqi_demo_a1b2c3')).toBe(false);
    expect(await keysUnder(ownRedis, '{bqi-demo-a1b2c3}')).toEqual([]);
    expect(await schemaExists(ownDatabase, 'bqi_demo_d4e5f6')).toBe(true);
    expect((await keysUnder(ownRedis, '{bqi-demo-d4e5f6}')).length).toBe(3);
    expect(await keysUnder(ownRedis, '{bqi-demo-other}')).toEqual(['{bqi-demo-other}:x']);

    const again = await runTs('scripts/demo.ts', ['--clean'], env, 60_000);
    expect(again.stdout).not.toContain('a1b2c3');
  });
});
