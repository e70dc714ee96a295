/**
 * The Errors table (docs/api.md) is what the CLI, the operations process and the environment checks
 * print: every code they report (through the one reporter, config/failure.ts) has a row, the exit
 * code a row states is the one the reporter gives, and every row that states an exit code is
 * produced by some failure. The exit-code table of docs/operations.md and its systemd unit agree too.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CliError, notFound, usageError } from '../../src/cli/errors.js';
import { ConfigError, ServiceUnavailableError } from '../../src/config/errors.js';
import { EXIT } from '../../src/config/exit-codes.js';
import { describeFailure, formatFailure } from '../../src/config/failure.js';
import { RedisUrlError } from '../../src/config/redis-url.js';
import { IdempotencyConfigError, NotMigratedError } from '../../src/errors/errors.js';
import { ERROR_CODES } from '../../src/errors/idempotency-error.js';
import { HttpListenError } from '../../src/ops/operations-process.js';
import { ROOT } from '../helpers/spawn.js';

const API = readFileSync(join(ROOT, 'docs/api.md'), 'utf8');
const OPERATIONS = readFileSync(join(ROOT, 'docs/operations.md'), 'utf8');

/** A section of a guide: from its heading to the next heading of its level or above (or the end). */
function section(doc: string, heading: string): string {
  const start = doc.indexOf(`\n${heading}\n`);
  expect(start, heading).toBeGreaterThan(0);
  const level = /^#+/.exec(heading)?.[0] ?? '##';
  const next = [...doc.slice(start + heading.length + 2).matchAll(/^(#+) /gm)].find(
    (m) => (m[1] as string).length <= level.length,
  );
  return doc.slice(start, next?.index === undefined ? undefined : start + heading.length + 2 + next.index);
}

/** The rows of the Errors table: code → its "when" cell. */
function errorsTable(): Map<string, string> {
  const rows = new Map<string, string>();
  for (const m of section(API, '## Errors').matchAll(/^\| `([A-Z_]+)` \| (.+?) \| [^|]+ \|$/gm))
    rows.set(m[1] as string, m[2] as string);
  return rows;
}

/** A Postgres error as pg gives it: a message and its SQLSTATE (or a socket's errno code). */
const pgError = (code: string, message: string) => Object.assign(new Error(message), { code });

/** One failure of each kind the CLI, `start` and the environment checks report. */
const FAILURES: [what: string, err: unknown][] = [
  ['bad arguments', usageError('bad flag')],
  ['a key without a record', notFound('no such key')],
  ['Ctrl-C', new CliError(EXIT.interrupted, 'stopped')],
  ['a command that fails', new CliError(EXIT.failure, 'the audit event could not be written')],
  ['a refused transition', new CliError(EXIT.illegalTransition, 'it is completed, not unknown')],
  ['a seal error met by a command', new CliError(EXIT.failure, 'cannot open', ERROR_CODES.sealKeyUnknown)],
  ['a sealed value altered', new CliError(EXIT.failure, 'cannot open', ERROR_CODES.sealInvalid)],
  ['no such confirmation', new CliError(EXIT.notFound, 'no cf-9', ERROR_CODES.confirmationNotFound)],
  [
    'a confirmation answered otherwise',
    new CliError(EXIT.illegalTransition, 'denied', ERROR_CODES.confirmationAnswered),
  ],
  ['a confirmation timed out', new CliError(EXIT.illegalTransition, 'too late', ERROR_CODES.confirmationTimedOut)],
  ['a --result that fails its schema', new CliError(EXIT.usage, 'not JSON', ERROR_CODES.invalidInput)],
  ['a bad variable', new ConfigError([{ variable: 'BQI_KEYRING', message: 'is not a usable keyring: …' }])],
  ['an unreachable service', new ServiceUnavailableError('Redis', 'redis://h:6379', 'ECONNREFUSED')],
  ['a schema not migrated', new NotMigratedError('app', ['idempotency_ledger'])],
  ['42P01 on a library table', pgError('42P01', 'relation "app.idempotency_ledger" does not exist')],
  ['3F000 on the schema', pgError('3F000', 'schema "app" does not exist')],
  ['a database that does not exist', pgError('3D000', 'database "x" does not exist')],
  ['a role that does not exist', pgError('28000', 'role "x" does not exist')],
  ['a refused password', pgError('28P01', 'password authentication failed for user "x"')],
  ['a connection lost mid-command', pgError('ECONNRESET', 'read ECONNRESET')],
  ['a REDIS_URL of no accepted form', new RedisUrlError('must be a redis:// URL')],
  ['a port that cannot be listened on', new HttpListenError('127.0.0.1', 9464, 'EADDRINUSE')],
  ['a bad option', new IdempotencyConfigError('keyring spec entry 1 has no key id', { option: 'keyring' })],
  ['anything else', new Error('boom')],
];

describe('the Errors table of docs/api.md is what the CLI, start and the environment checks print', () => {
  const rows = errorsTable();
  const reported = FAILURES.map(([what, err]) => ({ what, ...describeFailure(err, { schema: 'app' }) }));

  it('reads the table', () => {
    expect(rows.size).toBeGreaterThan(30);
  });

  it('every code printed has a row, and the exit code a row states is the one printed', () => {
    for (const f of reported) {
      const when = rows.get(f.code);
      expect(when, `${f.what}: ${f.code} has no row`).toBeDefined();
      const stated = /\bexit (\d+)/.exec(when as string)?.[1];
      if (stated !== undefined) expect(f.exitCode, `${f.what}: ${f.code}`).toBe(Number(stated));
    }
  });

  it('every row that states an exit code is printed with it (a row "reported as" another code, by that one)', () => {
    for (const [code, when] of rows) {
      const stated = /\bexit (\d+)/.exec(when)?.[1];
      if (stated === undefined) continue;
      const printedAs = /reported as `([A-Z_]+)`/.exec(when)?.[1] ?? code;
      const matching = reported.filter((f) => f.code === printedAs && f.exitCode === Number(stated));
      expect(matching.length, `${code}: no failure prints ${printedAs} with exit ${stated}`).toBeGreaterThan(0);
    }
  });

  it('the kinds the exit codes promise: configuration 3, unreachable 4, not migrated 3 with its fix', () => {
    const by = (what: string) => reported.find((f) => f.what === what);
    for (const what of ['a database that does not exist', 'a role that does not exist', 'a refused password']) {
      expect(by(what)).toMatchObject({ code: ERROR_CODES.envConfig, exitCode: EXIT.config });
    }
    for (const what of ['42P01 on a library table', '3F000 on the schema']) {
      expect(by(what)).toMatchObject({ code: ERROR_CODES.notMigrated, exitCode: EXIT.config });
      expect(by(what)?.message).toContain('run `BQI_SCHEMA=app npx bullmq-idempotency migrate`');
    }
    expect(by('a connection lost mid-command')).toMatchObject({ code: ERROR_CODES.serviceUnavailable, exitCode: 4 });
    // An application's own table missing is not the library's migration to run.
    const other = describeFailure(pgError('42P01', 'relation "public.orders" does not exist'), { schema: 'app' });
    expect(other.code).toBe(ERROR_CODES.commandFailed);
  });

  it('one format: each line of a message after its code', () => {
    const f = describeFailure(
      new ConfigError([
        { variable: 'REDIS_URL', message: 'is required' },
        { variable: 'BQI_KEYRING', message: 'is not a usable keyring: entry 1 has no key id' },
      ]),
      { schema: 'app' },
    );
    expect(formatFailure(f)).toBe(
      'IDEMPOTENCY_ENV_CONFIG: REDIS_URL is required\n' +
        'IDEMPOTENCY_ENV_CONFIG: BQI_KEYRING is not a usable keyring: entry 1 has no key id\n',
    );
  });

  it('the exit-code table of docs/operations.md and its systemd unit say the same', () => {
    const table = section(OPERATIONS, '### Exit codes');
    const row = (n: number) => new RegExp(`^\\| ${n} \\| (.+) \\|$`, 'm').exec(table)?.[1] ?? '';
    expect(row(EXIT.config)).toMatch(
      /a database or role that does not exist, credentials refused, a schema not migrated/,
    );
    expect(row(EXIT.config)).toContain('IDEMPOTENCY_NOT_MIGRATED');
    expect(row(EXIT.unreachable)).toMatch(/refused, timed out .*a host name that does not resolve/);
    const unit = OPERATIONS.slice(
      OPERATIONS.indexOf('```ini'),
      OPERATIONS.indexOf('```', OPERATIONS.indexOf('```ini') + 6),
    );
    expect(unit).toContain(`RestartPreventExitStatus=${EXIT.config}`);
    expect(unit).toMatch(/Bad configuration \(3: [^)]*a database or role that does not exist[^)]*\)/);
    expect(unit).toContain('an unreachable service (4) may');
  });

  it('no other prefix is printed: no BQI_CONFIG and no "error:" prefix of our own in src/', () => {
    const files = ['src/config/errors.ts', 'src/config/failure.ts', 'src/cli/main.ts', 'src/ops/run.ts'];
    for (const f of files) {
      const text = readFileSync(join(ROOT, f), 'utf8');
      expect(text, f).not.toContain('BQI_CONFIG:');
      expect(text, f).not.toMatch(/`error: \$\{/);
    }
  });
});
