import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { UndecodableAuditBatchError } from '../../src/audit/batch-codec.js';
import { AuditEventNotDurableError } from '../../src/audit/not-durable-error.js';
import { describeFailure, EXIT, notFound, usageError } from '../../src/cli/errors.js';
import { ConfigError, ServiceUnavailableError } from '../../src/config/errors.js';
import { RedisUrlError } from '../../src/config/redis-url.js';
import { NotMigratedError } from '../../src/errors/errors.js';
import { ERROR_CODES, IdempotencyError, isIdempotencyError } from '../../src/errors/idempotency-error.js';
import { HttpError } from '../../src/ops/http-server.js';
import { HttpListenError } from '../../src/ops/operations-process.js';
import { LedgerUnreachableError } from '../../src/worker/record.js';
import { ROOT } from '../helpers/spawn.js';

/** The file that holds the table: codes written there are the table itself. */
const TABLE = 'src/errors/idempotency-error.ts';

function sources(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.ts'))
    .map((f) => join(dir, f));
}

const FILES = ['src', 'migrations', 'jobs']
  .flatMap(sources)
  .filter((f) => f !== TABLE)
  .map((f) => ({ path: relative(ROOT, join(ROOT, f)), text: readFileSync(join(ROOT, f), 'utf8') }));

const CODES = new Set<string>(Object.values(ERROR_CODES));

/** A code as a string (TypeScript, SQL) or a code span of a doc comment: right after a quote. */
const WRITTEN_CODE = /(?<=['"`])(?:IDEMPOTENCY|AUDIT)_[A-Z][A-Z0-9_]*/g;

describe('error codes: one table', () => {
  it('every code written in src/, migrations/ and jobs/ (TypeScript or SQL) is in ERROR_CODES', () => {
    const written = FILES.flatMap((f) => [...f.text.matchAll(WRITTEN_CODE)].map((m) => `${m[0]} (${f.path})`));
    expect(written.length).toBeGreaterThan(20);
    expect(written.filter((w) => !CODES.has(w.split(' ')[0] as string))).toEqual([]);
  });

  it('every code in ERROR_CODES is used: referenced through the table, or written as a string', () => {
    const unused = Object.entries(ERROR_CODES).filter(
      ([name, code]) =>
        !FILES.some(
          (f) =>
            new RegExp(`ERROR_CODES\\.${name}\\b`).test(f.text) ||
            f.text.includes(`'${code}'`) ||
            f.text.includes(`"${code}"`),
        ),
    );
    expect(unused.map(([name, code]) => `${name}: ${code}`)).toEqual([]);
  });

  it('the codes are distinct, and each is documented in the Errors table of docs/api.md', () => {
    expect(CODES.size).toBe(Object.keys(ERROR_CODES).length);
    const api = readFileSync(join(ROOT, 'docs/api.md'), 'utf8');
    const start = api.indexOf('\n## Errors\n');
    const end = api.indexOf('\n## ', start + 1);
    expect(start).toBeGreaterThan(0);
    const section = api.slice(start, end < 0 ? undefined : end);
    expect([...CODES].filter((c) => !section.includes(`\`${c}\``))).toEqual([]);
  });
});

/**
 * The only classes that extend Error directly. RetryableError and TerminalError are thrown by
 * processors, with the processor's own code. EffectRequestError (src/testing) is the network
 * failure of the downstream stub's client: it stands for a third party's error that a processor
 * meets, with the socket's code (UND_ERR_SOCKET), so the wrapper must treat it as a processor's
 * error, not as one of its own. ConsoleRefusal (src/console) is an HTTP answer of the console's
 * handler with the console's own codes, caught there and never thrown out of it. An entry here
 * that no longer extends Error fails the test below.
 */
const NOT_ON_THE_BASE = new Set(['RetryableError', 'TerminalError', 'EffectRequestError', 'ConsoleRefusal']);

describe('error classes: one base', () => {
  const direct = FILES.flatMap((f) =>
    [...f.text.matchAll(/class (\w+)(?:<[^{]*>)? extends Error\b/g)].map((m) => m[1] as string),
  );

  it('every library error extends IdempotencyError (none but the listed ones extends Error itself)', () => {
    expect(direct.filter((name) => !NOT_ON_THE_BASE.has(name))).toEqual([]);
    expect([...NOT_ON_THE_BASE].filter((name) => !direct.includes(name))).toEqual([]);
  });

  it('each carries a code of the table, details typed by it, and is recognised by isIdempotencyError', () => {
    const errors: IdempotencyError[] = [
      new UndecodableAuditBatchError('not_json'),
      new AuditEventNotDurableError(ERROR_CODES.auditEventTooLarge, { eventId: 'e1', bytes: 300_000, limit: 262_144 }),
      new AuditEventNotDurableError(ERROR_CODES.auditEventLost),
      new NotMigratedError('s1', ['audit_events']),
      new ConfigError([{ variable: 'DATABASE_URL', message: 'is not set' }]),
      new ServiceUnavailableError('Redis', 'redis://127.0.0.1:1', 'ECONNREFUSED'),
      usageError('bad flag'),
      notFound('no such task'),
      new RedisUrlError('must be a redis:// URL'),
      new HttpError(405, 'method not allowed', { allow: 'GET, HEAD' }),
      new HttpListenError('127.0.0.1', 9464, 'EADDRINUSE'),
      new LedgerUnreachableError(
        'complete',
        Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }),
      ),
    ];
    expect(errors.map((e) => [e.name, e.code])).toEqual([
      ['UndecodableAuditBatchError', ERROR_CODES.auditBatchUndecodable],
      ['AuditEventNotDurableError', ERROR_CODES.auditEventTooLarge],
      ['AuditEventNotDurableError', ERROR_CODES.auditEventLost],
      ['NotMigratedError', ERROR_CODES.notMigrated],
      ['ConfigError', ERROR_CODES.envConfig],
      ['ServiceUnavailableError', ERROR_CODES.serviceUnavailable],
      ['CliError', ERROR_CODES.usage],
      ['CliError', ERROR_CODES.notFound],
      ['RedisUrlError', ERROR_CODES.invalidRedisUrl],
      ['HttpError', ERROR_CODES.httpStatus],
      ['HttpListenError', ERROR_CODES.httpListen],
      ['LedgerUnreachableError', ERROR_CODES.ledgerUnreachable],
    ]);
    expect(errors.slice(-4).map((e) => e.details)).toEqual([
      {},
      { status: 405, headers: { allow: 'GET, HEAD' } },
      { host: '127.0.0.1', port: 9464, reason: 'EADDRINUSE' },
      { what: 'complete' },
    ]);
    for (const e of errors) {
      expect(e).toBeInstanceOf(IdempotencyError);
      expect(isIdempotencyError(e)).toBe(true);
      expect(isIdempotencyError(e, e.code)).toBe(true);
      expect(JSON.parse(JSON.stringify(e))).toEqual({
        name: e.name,
        code: e.code,
        message: e.message,
        details: e.details,
      });
    }
    const tooLarge: unknown = errors[1];
    if (!isIdempotencyError(tooLarge, ERROR_CODES.auditEventTooLarge)) throw new Error('not narrowed');
    const bytes: number = tooLarge.details.bytes; // typed by the code: no cast
    expect(bytes).toBe(300_000);
    expect(isIdempotencyError(tooLarge, ERROR_CODES.auditEventLost)).toBe(false);
    // A copy of the library (another module instance) is recognised by its code.
    expect(isIdempotencyError(Object.assign(new Error('x'), { code: ERROR_CODES.conflict }))).toBe(true);
    expect(isIdempotencyError(Object.assign(new Error('x'), { code: 'IDEMPOTENCY_NOT_A_CODE' }))).toBe(false);
  });

  it('the CLI keeps its exit codes: usage 2, configuration and not migrated 3, unreachable 4, not found 5', () => {
    const exit = (err: unknown) => describeFailure(err, 'public').exitCode;
    expect(exit(usageError('x'))).toBe(EXIT.usage);
    expect(EXIT.usage).toBe(2);
    expect(exit(new ConfigError([{ variable: 'REDIS_URL', message: 'is not set' }]))).toBe(3);
    expect(exit(Object.assign(new Error('relation "s.idempotency_ledger" does not exist'), { code: '42P01' }))).toBe(3);
    expect(exit(new ServiceUnavailableError('Postgres', 'postgres://h/db', 'timeout'))).toBe(4);
    expect(exit(notFound('no such key'))).toBe(5);
  });
});
