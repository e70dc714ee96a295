/**
 * The operations process holds the application's own redaction rules (`BQI_REDACTION`, or the
 * `redaction` option): its writer then stores the batches of workers that hold the same rules
 * without a second redaction pass (their tags hold), where the built-in rules made it redact every
 * batch again. What reaches the table is counted: no e-mail address in clear either way. Rules
 * that cannot be used stop the start, before any connection, with `IDEMPOTENCY_CONFIG`.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Config, loadConfig } from '../../src/config/env.js';
import { ConfigError } from '../../src/config/errors.js';
import { ERROR_CODES } from '../../src/errors/idempotency-error.js';
import { startOperationsProcess } from '../../src/ops/operations-process.js';
import { defineRedactionPolicy } from '../../src/redaction/define-policy.js';
import { defineKeyring } from '../../src/sealing/keyring.js';
import { chargeOperation } from '../fixtures/operations.js';
import { TestContext, waitFor } from '../helpers/context.js';
import { TEST_KEYRING_SPEC, testKeyring } from '../helpers/keyring.js';
import { testRuntime } from '../helpers/runtime.js';

const t = new TestContext('ops_redaction');
const dir = mkdtempSync(join(tmpdir(), 'bqi-redaction-'));
const EMAIL = 'dana.opsrules@example.com';
const RULES = `{ version: 'app-2026-12', details: { 'tool.lookup': ['customer', 'region'] }, fields: { pii: ['customer'] } }`;

function file(name: string, text: string): string {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
}

beforeAll(async () => {
  await t.setup();
});
afterAll(async () => {
  await t.teardown();
  rmSync(dir, { recursive: true, force: true });
});

function config(vars: Record<string, string | undefined> = {}): Config {
  return loadConfig({
    DATABASE_URL: t.databaseUrl,
    REDIS_URL: t.redisUrl,
    BQI_SCHEMA: t.schema,
    BQI_PREFIX: t.prefix,
    BQI_AUDIT_QUEUE: 'audit',
    BQI_KEYRING: TEST_KEYRING_SPEC,
    LOG_LEVEL: 'silent',
    ...vars,
  });
}

describe('the operations process holds the application’s redaction rules', () => {
  it('stores the batches of workers with the same rules without a second pass; with the built-in rules it redacts them again', async () => {
    const module = file('redaction.mjs', `export const redaction = ${RULES};\n`);
    const { redaction } = (await import(module)) as { redaction: Parameters<typeof defineRedactionPolicy>[0] };
    const charge = chargeOperation({ queue: 'ops-rules' });
    const idem = testRuntime(t, { audit: { queue: 'audit', redaction } });
    idem.worker(
      charge,
      async (input, ctx) => {
        await ctx.audit({
          action: 'tool.lookup',
          decision: 'allow',
          details: { customer: EMAIL, region: 'eu', note: `contact ${EMAIL}` },
        });
        return { charged: input.amount };
      },
      { concurrency: 10 },
    );
    const JOBS = "action <> 'idempotency.swept'";
    const count = async (where: string) =>
      Number((await t.query(`select count(*)::int as n from ${t.schema}.audit_events where ${where}`)).rows[0]?.n);

    /** Runs `n` jobs beside an operations process of `cfg` and answers what its writer reported. */
    async function phase(cfg: Config, from: number, n: number) {
      const lines: Record<string, unknown>[] = [];
      const logger = pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line)) });
      const proc = await startOperationsProcess(cfg, { logger });
      const results: { tagHeld?: boolean; inserted?: number }[] = [];
      proc.workers.auditWriter.on('completed', (_job, r) => results.push(r));
      try {
        for (let i = from; i < from + n; i++) await idem.enqueue(charge, { order: `rules-${i}`, amount: i + 1 });
        // Claimed, the tool decision and completed: three events a job (the sweeper's own are apart).
        await waitFor(async () => (await count(JOBS)) === 3 * (from + n), `${3 * (from + n)} events`, 30_000);
      } finally {
        await proc.close();
      }
      return { results, lines };
    }
    try {
      const first = await phase(config(), 0, 20);
      const builtin = first.results;
      expect(first.lines.find((l) => l.msg === 'started')?.redaction).toMatchObject({ rules: 'built-in' });
      const inserted = (rs: typeof builtin) => rs.reduce((sum, r) => sum + (r.inserted ?? 0), 0);
      // The process's own sweeper sends an untagged batch of its summary now and then.
      expect(inserted(builtin.filter((r) => r.tagHeld === false))).toBeGreaterThanOrEqual(60);
      expect(builtin.filter((r) => r.tagHeld !== false)).toEqual([]);

      const second = await phase(config({ BQI_REDACTION: module }), 20, 20);
      const own = second.results;
      // The start says which rules the process holds, and each batch's line whether its tag held.
      expect(second.lines.find((l) => l.msg === 'started')?.redaction).toEqual({
        version: 'app-2026-12',
        rules: module,
      });
      const written = second.lines.filter((l) => l.msg === 'audit batch written' && l.tagHeld === true);
      expect(written.reduce((sum, l) => sum + Number(l.inserted), 0)).toBe(60);
      expect(inserted(own.filter((r) => r.tagHeld === true))).toBe(60);
      expect(inserted(own.filter((r) => r.tagHeld !== true))).toBeLessThanOrEqual(own.length);

      // Either way, the address reached the table only as a reference or a mask.
      expect(await count("action = 'tool.lookup'")).toBe(40);
      expect(await count(JOBS)).toBe(120);
      expect(await count(`audit_events::text like '%${EMAIL}%'`)).toBe(0);
      expect(await count(`audit_events::text like '%dana.opsrules%'`)).toBe(0);
      // The allow-list and the pii class are the application's: region kept, customer masked.
      const details = (
        await t.query(`select details from ${t.schema}.audit_events where action = 'tool.lookup' limit 1`)
      ).rows[0]?.details as Record<string, unknown>;
      expect(details.region).toBe('eu');
      expect(typeof details.customer).toBe('string');
      expect(details).not.toHaveProperty('note');
    } finally {
      await idem.close();
    }
  }, 120_000);

  it('loads the rules as a default export, a CommonJS module and a JSON file', async () => {
    const { configuredAuditPolicy } = await import('../../src/config/redaction-module.js');
    const paths = [
      file('default.mjs', `export default ${RULES};\n`),
      file('rules.cjs', `module.exports = { redaction: ${RULES} };\n`),
      file('plain.cjs', `module.exports = ${RULES};\n`),
      file(
        'rules.json',
        JSON.stringify({
          version: 'app-2026-12',
          details: { 'tool.lookup': ['customer', 'region'] },
          fields: { pii: ['customer'] },
        }),
      ),
    ];
    for (const path of paths) {
      const policy = await configuredAuditPolicy(config({ BQI_REDACTION: path }));
      expect(policy.version, path).toBe('app-2026-12');
      expect(policy.details, path).toEqual({ 'tool.lookup': ['customer', 'region'] });
      expect(policy.keyIds, path).toEqual(['t1']);
    }
  });
});

describe('rules that cannot be used stop the start before any connection', () => {
  // Nothing listens here: a start that went as far as connecting would fail otherwise.
  const unreachable = { DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none', REDIS_URL: 'redis://127.0.0.1:1' };

  async function refusal(cfg: Config, options = {}) {
    const err = await startOperationsProcess(cfg, options).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeDefined();
    return err as { code: string; message: string; details: { option?: string } };
  }

  it.each<[what: string, name: string, text: string, says: string]>([
    ['a file that does not exist', '', '', 'no such file'],
    ['a directory', '.', '', 'not a file'],
    ['a module that throws as it loads', 'throws.mjs', "throw new Error('boom');\n", 'cannot load'],
    ['a module with a syntax error', 'broken.mjs', 'export const redaction = {;\n', 'cannot load'],
    ['a module that exports no object', 'number.mjs', 'export default 42;\n', 'exports no redaction policy'],
    [
      'rules with their own keys',
      'keyed.mjs',
      `export default { version: 'v1', hmacKeys: [] };\n`,
      'leave hmacKeys out',
    ],
    ['rules the schema refuses', 'bad.mjs', `export default { version: 'not a version!' };\n`, 'version'],
  ])('%s', async (_what, name, text, says) => {
    const path = name === '' ? join(dir, 'missing.mjs') : name === '.' ? dir : file(name, text);
    const err = await refusal(config({ ...unreachable, BQI_REDACTION: path }));
    expect(err.code).toBe(ERROR_CODES.config);
    expect(err.details.option).toBe('BQI_REDACTION');
    expect(err.message).toMatch(/^BQI_REDACTION/);
    expect(err.message).toContain(says);
  });

  it('a module is never quoted: its error is told by its class', async () => {
    const path = file('quoting.mjs', "throw new Error('sk_live_do_not_print_me');\n");
    const err = await refusal(config({ ...unreachable, BQI_REDACTION: path }));
    expect(err.message).not.toContain('sk_live');
    expect(err.message).toContain('(Error)');
  });

  it('BQI_REDACTION without BQI_KEYRING, and the option without a keyring or keyed elsewhere', async () => {
    const env = { ...unreachable, BQI_REDACTION: join(dir, 'x.mjs') };
    expect(() => loadConfig(env)).toThrow(ConfigError);
    expect(() => loadConfig(env)).toThrow(/BQI_REDACTION.*needs BQI_KEYRING/);

    const noKeyring = loadConfig(unreachable);
    const err = await refusal(noKeyring, { redaction: { version: 'v1' } });
    expect([err.code, err.details.option]).toEqual([ERROR_CODES.config, 'redaction']);

    const other = defineKeyring({ keys: [{ id: 't1', secret: `base64:${randomBytes(32).toString('base64')}` }] });
    const elsewhere = defineRedactionPolicy({ version: 'v1', hmacKeys: other.refKeys() });
    const keyed = await refusal(config(unreachable), { redaction: elsewhere });
    expect([keyed.code, keyed.details.option]).toEqual([ERROR_CODES.config, 'redaction']);
    expect(keyed.message).toContain('not with the keyring');
    // Keyed from the same keyring: accepted (the start then fails on the unreachable services).
    const same = defineRedactionPolicy({ version: 'v1', hmacKeys: testKeyring.refKeys() });
    const later = await refusal(config(unreachable), { redaction: same });
    expect(later.code).toBe(ERROR_CODES.serviceUnavailable);
  });
});
