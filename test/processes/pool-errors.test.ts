/**
 * Postgres dropping idle connections (a restart, a failover, pg_terminate_backend, a proxy's idle
 * timeout) must not end the process: the library's pools count and log the drop, and the next
 * statement gets a new connection. Connections are terminated on the shared Postgres only by this
 * file's application_name, so no other test file is touched. An uncaught `'error'` event would
 * fail the whole run.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrate } from '../../migrations/migrate.js';
import { AuditStore } from '../../src/audit/audit-store.js';
import { LOST_CONNECTION_MESSAGE } from '../../src/db/pool-errors.js';
import type { PostgresLedger } from '../../src/ledger/postgres-ledger.js';
import { TestContext, waitFor } from '../helpers/context.js';
import { childEnv, finished, spawnTs } from '../helpers/spawn.js';

const t = new TestContext('pool_errors');

beforeAll(async () => {
  await t.setup();
});
afterAll(async () => {
  await t.teardown();
});

type Warned = { obj: Record<string, unknown>; msg: string | undefined };

function capture() {
  const lines: Warned[] = [];
  return { lines, logger: { warn: (obj: object, msg?: string) => lines.push({ obj: { ...obj }, msg }) } };
}

let n = 0;
function claimOf(prefix: string) {
  n++;
  return {
    key: { namespace: 'test/pool-errors', resourceKey: `${prefix}-${n}`, version: 'v1' },
    operation: 'pool.errors',
    fingerprint: 'fp',
    leaseMs: 10_000,
    retentionMs: 60_000,
    downstream: 'idempotent' as const,
  };
}

/** Terminates every idle connection tagged `applicationName`, waiting until each has gone. */
async function terminateIdle(applicationName: string): Promise<number> {
  const res = await t.query<{ n: string }>(
    `select count(*) filter (where pg_terminate_backend(pid, 10000)) as n
       from pg_stat_activity where application_name = $1 and state = 'idle' and pid <> pg_backend_pid()`,
    [applicationName],
  );
  return Number(res.rows[0]?.n ?? 0);
}

/** Opens `count` connections on the ledger's pool (concurrent claims) and waits until they are idle. */
async function openConnections(ledger: PostgresLedger, count: number): Promise<void> {
  await Promise.all(Array.from({ length: count }, () => ledger.claim(claimOf('open'))));
  await waitFor(
    () => ledger.pool.idleCount === ledger.pool.totalCount && ledger.pool.totalCount > 0,
    'the ledger pool to be idle',
  );
}

describe('a dropped idle connection', () => {
  it("on the ledger's own pool: counted, logged once by code, and the next claim succeeds", async () => {
    const { lines, logger } = capture();
    const ledger = t.ledger({ batching: false, poolSize: 4, logger });
    try {
      await openConnections(ledger, 4);
      const opened = ledger.pool.totalCount;
      const terminated = await terminateIdle(t.tag);
      expect(terminated).toBe(opened);
      await waitFor(() => ledger.metrics.poolErrors === terminated, 'the pool to report every lost connection');
      expect(lines).toHaveLength(terminated);
      for (const line of lines) {
        // 57P01 admin_shutdown; the message ("terminating connection due to administrator command") stays out.
        expect(line.obj.err).toBe('57P01');
        expect(line.msg).toBe(LOST_CONNECTION_MESSAGE);
        expect(JSON.stringify(line)).not.toMatch(/terminating/);
      }
      const after = await ledger.claim(claimOf('after'));
      expect(after.kind).toBe('acquired');
      if (after.kind === 'acquired') await ledger.complete(after.key, after.epoch, { ok: true });
    } finally {
      await ledger.close();
    }
  });

  it('on a pool the caller passes without an error listener: the ledger attaches one, once', async () => {
    const pool = t.pool(4);
    try {
      expect(pool.listenerCount('error')).toBe(0);
      const ledger = t.ledger({ pool, batching: false });
      new AuditStore(pool, t.schema); // shares the pool: no second listener, no second log line
      expect(pool.listenerCount('error')).toBe(1);
      await openConnections(ledger, 3);
      const terminated = await terminateIdle(t.tag);
      expect(terminated).toBeGreaterThan(0);
      await waitFor(() => ledger.metrics.poolErrors === terminated, 'the pool to report every lost connection');
      expect((await ledger.claim(claimOf('user-pool'))).kind).toBe('acquired');
      await ledger.close(); // not the caller's pool
      expect(pool.ended).toBe(false);
    } finally {
      await pool.end();
    }
  });

  it('on a pool with its own error listener: left to it', async () => {
    const pool = t.pool(4);
    const seen: unknown[] = [];
    pool.on('error', (err) => seen.push(err));
    try {
      const ledger = t.ledger({ pool, batching: false });
      expect(pool.listenerCount('error')).toBe(1);
      await openConnections(ledger, 2);
      const terminated = await terminateIdle(t.tag);
      await waitFor(() => seen.length === terminated, "the caller's listener to see every lost connection");
      expect(ledger.metrics.poolErrors).toBe(0);
      expect((await ledger.claim(claimOf('own-listener'))).kind).toBe('acquired');
      await ledger.close();
    } finally {
      await pool.end();
    }
  });

  it('of a client checked out between two statements: its next query fails, the process lives on', async () => {
    const ledger = t.ledger({ batching: false, poolSize: 2 });
    try {
      const client = await ledger.pool.connect();
      // Not events.once: it would reject on the 'error' that comes first.
      const ended = new Promise((resolve) => client.once('end', resolve));
      let released = false;
      try {
        await client.query('begin');
        const pid = (await client.query<{ pid: number }>('select pg_backend_pid() as pid')).rows[0]?.pid;
        await t.query('select pg_terminate_backend($1, 10000)', [pid]);
        await ended; // the client saw its connection go while no query ran
        await expect(client.query('select 1')).rejects.toThrow();
        client.release(true);
        released = true;
      } finally {
        if (!released) client.release(true);
      }
      expect((await ledger.claim(claimOf('checked-out'))).kind).toBe('acquired');
    } finally {
      await ledger.close();
    }
  });

  it('in a child process holding a ledger pool: it stays alive, logs each drop by code, claims again', async () => {
    const appName = `${t.tag}_child`;
    const url = new URL(t.databaseUrl);
    url.searchParams.set('application_name', appName);
    const child = spawnTs(
      'test/helpers/pool-child.ts',
      [],
      childEnv({ DATABASE_URL: url.toString(), BQI_SCHEMA: t.schema }),
    );
    const exit = finished(child, 60_000, 'pool child');
    try {
      const lines = () =>
        child.out
          .split('\n')
          .filter((l) => l.startsWith('{'))
          .map((l) => JSON.parse(l) as Record<string, unknown>);
      const ready = await waitFor(
        () => lines().find((l) => l.msg === 'ready'),
        `the child to be ready\n${child.out}\n${child.err}`,
        30_000,
      );
      const connections = ready?.connections as number;
      expect(connections).toBeGreaterThan(0);
      // Its connections are idle now; a connection still busy would be missed and the child would wait on it.
      await waitFor(
        async () =>
          Number(
            (
              await t.query<{ n: string }>(
                `select count(*) as n from pg_stat_activity where application_name = $1 and state = 'idle'`,
                [appName],
              )
            ).rows[0]?.n,
          ) === connections,
        "the child's connections to be idle",
      );
      expect(await terminateIdle(appName)).toBe(connections);
      const result = await exit;
      expect(result.code, result.stderr).toBe(0);
      const out = lines();
      expect(out.find((l) => l.msg === 'claimed')).toMatchObject({ kind: 'acquired', poolErrors: connections });
      const warnings = out.filter((l) => l.level === 'warn');
      expect(warnings).toHaveLength(connections);
      for (const w of warnings)
        expect(w).toEqual({ level: 'warn', err: '57P01', lost: expect.any(Number), msg: LOST_CONNECTION_MESSAGE });
      expect(child.out + child.err).not.toMatch(/terminating connection/);
    } finally {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exit.catch(() => {});
    }
  });
});

describe('migrate', () => {
  it('watches a pool it is given: a lost idle connection is replaced, the next run succeeds', async () => {
    const pool = new pg.Pool({ connectionString: t.databaseUrl, max: 2 });
    try {
      await migrate({ pool, schema: t.schema });
      expect(pool.listenerCount('error')).toBe(1);
      await waitFor(() => pool.idleCount === pool.totalCount, 'the pool to be idle');
      const terminated = await terminateIdle(t.tag);
      expect(terminated).toBeGreaterThan(0);
      await waitFor(() => pool.totalCount === 0, 'the pool to drop its lost connections');
      const again = await migrate({ pool, schema: t.schema });
      expect(again.error).toBeUndefined();
    } finally {
      await pool.end();
    }
  });
});
