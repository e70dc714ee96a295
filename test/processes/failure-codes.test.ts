/**
 * One vocabulary of failures: the CLI's commands and the operations process (`start`), run as the
 * real binary, print every failure as `CODE: message` lines on stderr, the code from the README's
 * Errors table, and exit with the code of its kind: 2 usage, 3 configuration (a database or role
 * that does not exist, refused credentials, a schema not migrated), 4 unreachable, 5 not found.
 */
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXIT } from '../../src/config/exit-codes.js';
import { cliEnv } from '../helpers/cli-env.js';
import { TestContext } from '../helpers/context.js';
import { PrivatePostgres } from '../helpers/private-postgres.js';
import { startSilentServer } from '../helpers/silent-server.js';
import { type Finished, runTs } from '../helpers/spawn.js';

const t = new TestContext('failure-codes');
const CLI = 'src/cli/main.ts';

const env = (vars: Record<string, string | undefined> = {}) => cliEnv(t, vars);
const cli = (args: string[], vars?: Record<string, string | undefined>) => runTs(CLI, args, env(vars), 60_000);

/** The shared server's URL with another user or database. */
function sharedUrl(change: { user?: string; database?: string }): string {
  const u = new URL(t.databaseUrl);
  if (change.user) u.username = change.user;
  if (change.database) u.pathname = `/${change.database}`;
  return u.toString();
}

/** A TCP listener that accepts connections and never answers: a Redis that hangs. */
let silent: Awaited<ReturnType<typeof startSilentServer>>;
let silentUrl: string;

beforeAll(async () => {
  await t.setup();
  silent = await startSilentServer();
  silentUrl = `redis://127.0.0.1:${silent.port}`;
});
afterAll(async () => {
  await silent.close();
  await t.teardown();
});

/** Every line of stderr carries a code of the table; no stack, no `error:` or `BQI_CONFIG:` prefix. */
function expectCoded(r: Finished, code: string, exitCode: number, says?: string) {
  expect(r.code, r.stderr).toBe(exitCode);
  const lines = r.stderr.split('\n').filter((l) => l.length > 0 && l !== '(add --help for usage)');
  expect(lines.length, r.stderr).toBeGreaterThan(0);
  for (const line of lines) expect(line).toMatch(new RegExp(`^${code}: `));
  expect(r.stderr).not.toMatch(/^\s+at /m);
  if (says) expect(r.stderr).toContain(says);
}

describe.concurrent('CLI commands: each failure prints its code and exits with its code', () => {
  const encoded = randomBytes(32).toString('base64');
  const other = randomBytes(32).toString('base64');
  it.each<
    [what: string, args: string[], vars: Record<string, string | undefined>, code: string, exit: number, says: string]
  >([
    [
      'a keyring entry without an id',
      ['stats'],
      { BQI_KEYRING: `base64:${encoded}` },
      'IDEMPOTENCY_ENV_CONFIG',
      EXIT.config,
      'BQI_KEYRING is not a usable keyring: entry 1 has no key id: the form is id:base64:…',
    ],
    [
      'a keyring secret that is not base64',
      ['stats'],
      { BQI_KEYRING: 'k1:base64:not*base64!' },
      'IDEMPOTENCY_ENV_CONFIG',
      EXIT.config,
      'BQI_KEYRING is not a usable keyring: key k1: its secret is not valid base64',
    ],
    [
      'a keyring id listed twice',
      ['stats'],
      { BQI_KEYRING: `k1:base64:${encoded},k1:base64:${other}` },
      'IDEMPOTENCY_ENV_CONFIG',
      EXIT.config,
      'key id k1 is listed twice (entries 1 and 2)',
    ],
    [
      'an empty keyring',
      ['stats'],
      { BQI_KEYRING: ' , ' },
      'IDEMPOTENCY_ENV_CONFIG',
      EXIT.config,
      'BQI_KEYRING is not a usable keyring: is empty',
    ],
    [
      'a keyring key too short',
      ['stats'],
      { BQI_KEYRING: `k1:base64:${randomBytes(6).toString('base64')}` },
      'IDEMPOTENCY_ENV_CONFIG',
      EXIT.config,
      'key k1 is too weak: its secret is 6 bytes',
    ],
    [
      'an unmigrated schema',
      ['list', '--status', 'unknown'],
      { BQI_SCHEMA: `${t.schema}_none` },
      'IDEMPOTENCY_NOT_MIGRATED',
      EXIT.config,
      `run \`BQI_SCHEMA=${t.schema}_none npx bullmq-idempotency migrate\``,
    ],
    [
      'an unmigrated schema given by --schema',
      ['stats', '--schema', `${t.schema}_flag`],
      {},
      'IDEMPOTENCY_NOT_MIGRATED',
      EXIT.config,
      `schema ${t.schema}_flag is not migrated`,
    ],
    [
      'a database that does not exist (3D000)',
      ['stats'],
      { DATABASE_URL: sharedUrl({ database: 'bqi_no_such_database' }) },
      'IDEMPOTENCY_ENV_CONFIG',
      EXIT.config,
      'database "bqi_no_such_database" does not exist',
    ],
    [
      'a role that does not exist (28000)',
      ['stats'],
      { DATABASE_URL: sharedUrl({ user: 'bqi_no_such_role' }) },
      'IDEMPOTENCY_ENV_CONFIG',
      EXIT.config,
      'role "bqi_no_such_role" does not exist',
    ],
    [
      'a Postgres that refuses connections',
      ['stats'],
      { DATABASE_URL: 'postgres://postgres@127.0.0.1:1/test' },
      'IDEMPOTENCY_SERVICE_UNAVAILABLE',
      EXIT.unreachable,
      'ECONNREFUSED',
    ],
    [
      'a Postgres host name that does not resolve',
      ['stats'],
      { DATABASE_URL: 'postgres://postgres@bqi-no-such-host.invalid:5432/test' },
      'IDEMPOTENCY_SERVICE_UNAVAILABLE',
      EXIT.unreachable,
      'bqi-no-such-host.invalid',
    ],
    [
      'a Redis that refuses connections',
      ['inspect', '--job', 'assets', 'idem_x'],
      { REDIS_URL: 'redis://127.0.0.1:1' },
      'IDEMPOTENCY_SERVICE_UNAVAILABLE',
      EXIT.unreachable,
      'cannot reach Redis at redis://127.0.0.1:1',
    ],
    [
      'a missing DATABASE_URL',
      ['stats'],
      { DATABASE_URL: undefined },
      'IDEMPOTENCY_ENV_CONFIG',
      EXIT.config,
      'DATABASE_URL is required',
    ],
    ['an unknown option', ['stats', '--bogus'], {}, 'IDEMPOTENCY_USAGE', EXIT.usage, "unknown option '<not echoed>'"],
    [
      'a malformed key',
      ['inspect', 'a:b'],
      {},
      'IDEMPOTENCY_USAGE',
      EXIT.usage,
      'malformed key (3 characters, not echoed)',
    ],
    [
      'a key without a record',
      ['inspect', 'acme:nothing:v1'],
      {},
      'IDEMPOTENCY_KEY_NOT_FOUND',
      EXIT.notFound,
      'no ledger record for key acme:nothing:v1',
    ],
  ])('%s', async (_what, args, vars, code, exit, says) => {
    expectCoded(await cli(args, vars), code, exit, says);
  });

  it('a Redis that accepts and never answers fails within the check (6 s), exit 4, never hangs', async () => {
    const started = Date.now();
    const r = await cli(['inspect', '--job', 'assets', 'idem_x'], { REDIS_URL: silentUrl });
    expectCoded(r, 'IDEMPOTENCY_SERVICE_UNAVAILABLE', EXIT.unreachable, 'no answer within 6000 ms');
    // 6 s of check, the process's start and its 2 s exit guard, on a loaded machine.
    expect(Date.now() - started).toBeLessThan(30_000);
  });
});

describe.concurrent('the operations process: each start-up failure prints its code and exits with its code', () => {
  const start = (vars: Record<string, string | undefined>, ...flags: string[]) =>
    runTs(CLI, ['start', ...flags], env(vars), 60_000);

  it.each<
    [what: string, vars: Record<string, string | undefined>, flags: string[], code: string, exit: number, says: string]
  >([
    [
      'a keyring entry without an id',
      { BQI_KEYRING: `base64:${randomBytes(32).toString('base64')}` },
      [],
      'IDEMPOTENCY_ENV_CONFIG',
      EXIT.config,
      'entry 1 has no key id',
    ],
    [
      'a redaction module that does not exist',
      { BQI_KEYRING: `k1:base64:${randomBytes(32).toString('base64')}`, BQI_REDACTION: 'no-such-rules.mjs' },
      [],
      'IDEMPOTENCY_CONFIG',
      EXIT.config,
      'BQI_REDACTION: no such file',
    ],
    [
      'a redaction module without a keyring',
      { BQI_KEYRING: undefined, BQI_REDACTION: 'rules.mjs' },
      [],
      'IDEMPOTENCY_ENV_CONFIG',
      EXIT.config,
      'BQI_REDACTION needs BQI_KEYRING',
    ],
    [
      'an unmigrated schema',
      {},
      ['--schema', `${t.schema}_start`],
      'IDEMPOTENCY_NOT_MIGRATED',
      EXIT.config,
      `run \`BQI_SCHEMA=${t.schema}_start npx bullmq-idempotency migrate\``,
    ],
    [
      'a database that does not exist',
      { DATABASE_URL: sharedUrl({ database: 'bqi_no_such_database' }) },
      [],
      'IDEMPOTENCY_ENV_CONFIG',
      EXIT.config,
      'database "bqi_no_such_database" does not exist',
    ],
    [
      'a role that does not exist',
      { DATABASE_URL: sharedUrl({ user: 'bqi_no_such_role' }) },
      [],
      'IDEMPOTENCY_ENV_CONFIG',
      EXIT.config,
      'role "bqi_no_such_role" does not exist',
    ],
    [
      'a Redis that refuses connections',
      { REDIS_URL: 'redis://127.0.0.1:1' },
      [],
      'IDEMPOTENCY_SERVICE_UNAVAILABLE',
      EXIT.unreachable,
      'cannot reach Redis',
    ],
  ])('%s', async (_what, vars, flags, code, exit, says) => {
    const r = await start(vars, ...flags);
    expectCoded(r, code, exit, says);
    // The fatal log line carries the same code.
    expect(JSON.parse(r.stdout.trim().split('\n').at(-1) as string)).toMatchObject({ level: 60, code, exitCode: exit });
  });

  it('a Redis that accepts and never answers: exit 4 within the check, never hangs', async () => {
    const started = Date.now();
    const r = await start({ REDIS_URL: silentUrl });
    expectCoded(r, 'IDEMPOTENCY_SERVICE_UNAVAILABLE', EXIT.unreachable, 'no answer within 6000 ms');
    expect(Date.now() - started).toBeLessThan(30_000);
  });
});

describe('refused credentials (28P01)', () => {
  let db: PrivatePostgres;
  let url: string;

  beforeAll(async () => {
    db = await PrivatePostgres.start();
    const admin = new pg.Client({ connectionString: db.url() });
    await admin.connect();
    try {
      await admin.query("create role bqi_app login password 'right-password'");
      // Passwords are checked on TCP; the local socket stays trusted for the test's own client.
      writeFileSync(
        join(db.dir, 'data', 'pg_hba.conf'),
        'local all all trust\nhost all postgres 127.0.0.1/32 trust\nhost all all 127.0.0.1/32 scram-sha-256\n',
      );
      await admin.query('select pg_reload_conf()');
    } finally {
      await admin.end();
    }
    const u = new URL(db.url());
    u.username = 'bqi_app';
    u.password = 'wrong-password';
    url = u.toString();
  }, 120_000);
  afterAll(async () => {
    await db?.destroy();
  });

  it('a wrong password is a configuration error (exit 3) for a command and for start, never "unreachable"', async () => {
    const [command, started] = await Promise.all([
      cli(['stats'], { DATABASE_URL: url }),
      runTs(CLI, ['start'], env({ DATABASE_URL: url }), 60_000),
    ]);
    for (const r of [command, started]) {
      expectCoded(r, 'IDEMPOTENCY_ENV_CONFIG', EXIT.config, 'password authentication failed for user "bqi_app"');
      expect(r.stderr).not.toContain('wrong-password');
    }
  });
});
