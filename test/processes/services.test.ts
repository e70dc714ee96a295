import pg from 'pg';
import { describe, expect, inject, it } from 'vitest';
import { DEFAULT_LOCAL_POSTGRES, DEFAULT_LOCAL_REDIS, EXPORT_LINE } from '../../scripts/services.js';
import { childEnv, runTs } from '../helpers/spawn.js';

const CHILD = 'test/helpers/services-child.ts';
// Ports nothing listens on: the probes are refused at once.
const NOWHERE = { localPostgres: ['postgres://postgres@127.0.0.1:1'], localRedis: ['redis://127.0.0.1:2'] };

/** The server part of a URL (no database), as the probe candidates are written. */
function server(url: string): string {
  const u = new URL(url);
  u.pathname = '';
  return u.toString().replace(/\/$/, '');
}

/** The suite's own services as probe candidates; the defaults themselves when that is where they run. */
function localOptions(databaseUrl: string, redisUrl: string) {
  const pgServer = server(databaseUrl);
  const redisServer = server(redisUrl);
  return {
    ...(DEFAULT_LOCAL_POSTGRES.includes(pgServer) ? {} : { localPostgres: [pgServer] }),
    ...(DEFAULT_LOCAL_REDIS.includes(redisServer) ? {} : { localRedis: [redisServer] }),
  };
}

function noStackTrace(text: string) {
  expect(text).not.toMatch(/^\s+at /m);
  expect(text).not.toMatch(/Error:/);
}

describe('service resolution with DATABASE_URL and REDIS_URL unset', () => {
  it('uses the Postgres and Redis that answer locally, the test database when there is one', async () => {
    const databaseUrl = inject('databaseUrl');
    const redisUrl = inject('redisUrl');
    const admin = new pg.Client({ connectionString: databaseUrl });
    await admin.connect();
    const { rows } = await admin.query<{ has: boolean }>(
      "select exists (select 1 from pg_database where datname = 'test') as has",
    );
    await admin.end();

    const run = await runTs(CHILD, [JSON.stringify(localOptions(databaseUrl, redisUrl))], childEnv({}));

    expect(run.code, run.stderr).toBe(0);
    const chosen = JSON.parse(run.stdout) as { databaseUrl: string; redisUrl: string };
    expect(server(chosen.databaseUrl)).toBe(server(databaseUrl));
    expect(new URL(chosen.databaseUrl).pathname).toBe(rows[0]?.has ? '/test' : '/postgres');
    expect(server(chosen.redisUrl)).toBe(server(redisUrl));
    expect(run.stderr).toMatch(/DATABASE_URL\/REDIS_URL not set: using Postgres at .+ and Redis at /);
  });

  it('with nothing local and no containers: one paragraph and the export line on stderr, exit 1', async () => {
    const run = await runTs(CHILD, [JSON.stringify({ ...NOWHERE, containers: false })], childEnv({}));

    expect(run.code).toBe(1);
    expect(run.stdout).toBe('');
    expect(run.stderr).toContain('need Postgres ≥ 15 and Redis ≥ 6.2');
    expect(run.stderr).toContain('no Postgres answered at 127.0.0.1:1 (ECONNREFUSED)');
    expect(run.stderr).toContain('no Redis answered at 127.0.0.1:2 (ECONNREFUSED)');
    expect(run.stderr).toContain(`\n  ${EXPORT_LINE}\n`);
    noStackTrace(run.stderr);
  });

  it('names only what is missing: a DATABASE_URL that is set is used as it is', async () => {
    const databaseUrl = inject('databaseUrl');
    const run = await runTs(
      CHILD,
      [JSON.stringify({ ...NOWHERE, containers: false })],
      childEnv({ DATABASE_URL: databaseUrl }),
    );

    expect(run.code).toBe(1);
    expect(run.stderr).toContain('REDIS_URL is unset and no Redis answered');
    expect(run.stderr).not.toContain('DATABASE_URL is unset');
    noStackTrace(run.stderr);
  });
});
