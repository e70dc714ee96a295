/**
 * The demo's and the tests' service resolution (scripts/services.ts) with DATABASE_URL or
 * REDIS_URL set but wrong: one `CODE: message` line and the CLI's exit code, never a stack trace,
 * and never a hang on a Redis that does not answer.
 */
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { startSilentServer } from '../helpers/silent-server.js';
import { childEnv, runTs } from '../helpers/spawn.js';

const CHILD = 'test/helpers/services-child.ts';
const OPTIONS = JSON.stringify({ containers: false });

let silent: Awaited<ReturnType<typeof startSilentServer>>;
let silentUrl: string;

beforeAll(async () => {
  silent = await startSilentServer();
  silentUrl = `redis://127.0.0.1:${silent.port}`;
});
afterAll(() => silent.close());

function withDatabase(database: string): string {
  const u = new URL(inject('databaseUrl'));
  u.pathname = `/${database}`;
  return u.toString();
}

describe.concurrent('a DATABASE_URL or REDIS_URL that is set but wrong', () => {
  it.each<[what: string, vars: () => Record<string, string>, code: string, exit: number, says: string]>([
    [
      'a database that does not exist',
      () => ({ DATABASE_URL: withDatabase('bqi_no_such_database'), REDIS_URL: inject('redisUrl') }),
      'IDEMPOTENCY_ENV_CONFIG',
      3,
      'database "bqi_no_such_database" does not exist',
    ],
    [
      'a DATABASE_URL that is not postgres://',
      () => ({ DATABASE_URL: 'mysql://db/app', REDIS_URL: inject('redisUrl') }),
      'IDEMPOTENCY_ENV_CONFIG',
      3,
      'DATABASE_URL must be a postgres:// URL',
    ],
    [
      'a Postgres that refuses connections',
      () => ({ DATABASE_URL: 'postgres://postgres@127.0.0.1:1/test', REDIS_URL: inject('redisUrl') }),
      'IDEMPOTENCY_SERVICE_UNAVAILABLE',
      4,
      'cannot reach Postgres at postgres://postgres@127.0.0.1:1/test',
    ],
    [
      'a Redis that refuses connections',
      () => ({ DATABASE_URL: inject('databaseUrl'), REDIS_URL: 'redis://127.0.0.1:1' }),
      'IDEMPOTENCY_SERVICE_UNAVAILABLE',
      4,
      'cannot reach Redis at redis://127.0.0.1:1',
    ],
    [
      'a Redis that accepts and never answers',
      () => ({ DATABASE_URL: inject('databaseUrl'), REDIS_URL: silentUrl }),
      'IDEMPOTENCY_SERVICE_UNAVAILABLE',
      4,
      'no answer within 6000 ms',
    ],
  ])('%s: its code, its exit code, no stack', async (_what, vars, code, exit, says) => {
    const started = Date.now();
    const run = await runTs(CHILD, [OPTIONS], childEnv(vars()), 60_000);
    expect(run.code, run.stderr).toBe(exit);
    expect(run.stdout).toBe('');
    expect(run.stderr).toMatch(new RegExp(`^${code}: [^\\n]+\\n$`));
    expect(run.stderr).toContain(says);
    expect(run.stderr).not.toMatch(/^\s+at /m);
    // The Redis check is bounded (6 s); the rest is the child's start on a loaded machine.
    expect(Date.now() - started).toBeLessThan(30_000);
  });
});
