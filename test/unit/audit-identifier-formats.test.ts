import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { AuditEvent } from '../../src/audit/audit-event.js';
import { auditRedactor } from '../../src/audit/redact-event.js';
import { boundedKey } from '../../src/keys/idempotency-key.js';
import { defineRedactionPolicy } from '../../src/redaction/define-policy.js';
import { isKsuid, isObjectId, isUlid } from '../../src/redaction/identifier-formats.js';
import { BUILTIN_FRESH, ksuid, objectId, PERSONAL_FORMATS, ulid } from '../fixtures/personal-corpus.js';
import { sampleAuditEvent } from '../helpers/audit-sample.js';

const keys = [{ id: 'k1', secret: randomBytes(32) }];
const plain = defineRedactionPolicy({ version: 'formats-1', hmacKeys: keys });
const declared = defineRedactionPolicy({
  version: 'formats-2',
  hmacKeys: keys,
  identifiers: {
    taskId: ['ulid', /^task-[a-z]+-[0-9a-f]{4,12}$/],
    jobId: [(v) => /^run-[0-9]{11}$/.test(v)],
    '*': [{ prefix: 'cus_' }, { prefix: 'pi_', body: /^[A-Za-z0-9]{24}$/ }],
  },
});

/** The identifier fields of an event (and the reason code, which takes no built-in format). */
const ID_FIELDS = [
  'taskId',
  'resourceId',
  'actorId',
  'jobId',
  'stepId',
  'operationId',
  'operation',
  'queue',
  'beforeStateRef',
  'afterStateRef',
] as const;
const ALL_FIELDS = [...ID_FIELDS, 'reasonCode'] as const;

/** Tens of thousands of whole events redacted: CPU-bound, a few times slower on a loaded machine. */
const CORPUS_TIMEOUT_MS = 300_000;

function event(over: Partial<AuditEvent>): AuditEvent {
  return { ...sampleAuditEvent('formats', randomBytes(8).toString('hex')), ...over };
}

/** Share of `values` told in clear in `field` by `redact`. */
function keptShare(redact: (e: AuditEvent) => AuditEvent, field: string, values: string[]): number {
  let kept = 0;
  for (const v of values) if (redact(event({ [field]: v }))[field as keyof AuditEvent] === v) kept++;
  return kept / values.length;
}

describe('identifier formats', () => {
  it(
    'fresh ULIDs, KSUIDs, ObjectIds and UUIDs v1/v4/v7 stay readable in every identifier field (>= 99% of 1,000 each)',
    () => {
      for (const policy of [plain, declared]) {
        const redact = auditRedactor(policy);
        for (const [name, make] of BUILTIN_FRESH) {
          const values = Array.from({ length: 1000 }, make);
          for (const field of ID_FIELDS) {
            expect(keptShare(redact, field, values), `${name} in ${field}`).toBeGreaterThanOrEqual(0.99);
          }
        }
      }
    },
    CORPUS_TIMEOUT_MS,
  );

  it('an embedded time out of range (before 2000, or days ahead) is not one of the formats', () => {
    const future = Date.now() + 3 * 86_400_000;
    expect(isUlid(ulid(future))).toBe(false);
    expect(isUlid(ulid(Date.UTC(1999, 0, 1)))).toBe(false);
    expect(isKsuid(ksuid(future))).toBe(false);
    expect(isObjectId(objectId(future))).toBe(false);
    expect(isObjectId(objectId(Date.UTC(1990, 0, 1)))).toBe(false);
    expect(isUlid(ulid())).toBe(true);
    expect(isKsuid(ksuid())).toBe(true);
    expect(isObjectId(objectId())).toBe(true);
  });

  it('declared formats keep their ids, per field and for every field; undeclared fields and policies reference them', () => {
    const withFormats = auditRedactor(declared);
    const without = auditRedactor(plain);
    const hexSuffix = () => `task-checkout-${randomBytes(5).toString('hex')}`;
    const customer = () => `cus_${randomBytes(10).toString('base64url').replace(/[-_]/g, 'x')}`;
    const intent = () => `pi_${'A1b2C3d4'.repeat(3)}`;
    const run = () => `run-${String(Date.now()).slice(0, 11)}`;
    const cases: [string, string, () => string][] = [
      ['taskId', 'regex', hexSuffix],
      ['jobId', 'predicate', run],
      ['taskId', 'prefix (*)', customer],
      ['actorId', 'prefix (*)', customer],
      ['resourceId', 'prefix with body (*)', intent],
    ];
    for (const [field, kind, make] of cases) {
      const values = Array.from({ length: 200 }, make);
      expect(keptShare(withFormats, field, values), `${kind} in ${field}`).toBe(1);
      expect(keptShare(without, field, values), `${kind} in ${field}, not declared`).toBeLessThan(1);
    }
    // Per field only: the taskId regex does not hold in actorId.
    expect(keptShare(withFormats, 'actorId', Array.from({ length: 200 }, hexSuffix))).toBeLessThan(1);
    // A prefix with a body that does not match is referenced.
    expect(withFormats(event({ resourceId: `pi_${'A1b2C3d4'.repeat(2)}` })).resourceId).toMatch(/^hmac:k1:/);
  });

  it('a bad declaration is refused with IDEMPOTENCY_CONFIG', () => {
    for (const identifiers of [{ taskId: ['base32'] }, { nope: ['ulid'] }, { '*': [{ prefix: '' }] }]) {
      expect(() =>
        defineRedactionPolicy({ version: 'x', hmacKeys: keys, identifiers: identifiers as never }),
      ).toThrowError(expect.objectContaining({ code: 'IDEMPOTENCY_CONFIG' }));
    }
  });

  it('the default grammar keeps word-like ids and refuses numbers written with separators', () => {
    const redact = auditRedactor(plain);
    for (const v of [
      'order-2026-000123',
      'PROJ-42',
      'tool.charge_card',
      'task:42',
      'user_123',
      'worker:ip-10-0-1-23',
    ]) {
      expect(redact(event({ resourceId: v })).resourceId, v).toBe(v);
    }
    for (const v of [
      '1985-04-12',
      '123-45-6789',
      '4111-1111-1111-1111',
      '12.04.1985',
      '850412-1234',
      '12Apr1985',
      '2024-05-01T12:00:00.000Z',
    ]) {
      expect(redact(event({ resourceId: v })).resourceId, v).toMatch(/^hmac:k1:/);
    }
  });
});

/**
 * Random tokens of 12-16 characters (base62, base64url, and base64, whose `/` cuts a token into
 * short words) can have an ordinary word's shape: a few in ten thousand draws of each pass, by
 * field (measured over 50,000 draws each). Their share is bounded below; every other format
 * passes no field at all.
 */
const SHORT_TOKEN = /^(?:base62 token, 1[2-6]|base64url token, 1[26]|base64 token, 16) chars$/;
const SHORT_TOKEN_DRAWS = 4000;
/** At most 0.5% (20 of 4,000): the highest measured share is 0.12%, so a count over it is a change, not chance (p < 1e-5 over the 24 counts). */
const SHORT_TOKEN_MAX_PASSED = 20;

describe('secret and personal values pass no identifier field', () => {
  it(
    `${PERSONAL_FORMATS.filter(([name]) => !SHORT_TOKEN.test(name)).length} formats, 20 fresh values each, in ${ALL_FIELDS.length} fields, with and without declared formats`,
    () => {
      expect(PERSONAL_FORMATS.length).toBeGreaterThanOrEqual(100);
      expect(PERSONAL_FORMATS.filter(([name]) => SHORT_TOKEN.test(name))).toHaveLength(8);
      const passed: string[] = [];
      for (const policy of [plain, declared]) {
        const redact = auditRedactor(policy);
        for (const [name, make] of PERSONAL_FORMATS) {
          if (SHORT_TOKEN.test(name)) continue;
          for (let i = 0; i < 20; i++) {
            const v = make();
            for (const field of ALL_FIELDS) {
              const out = redact(event({ [field]: v }));
              if (JSON.stringify(out).includes(v)) passed.push(`${name} as ${field}: ${v}`);
            }
          }
        }
      }
      expect(passed).toEqual([]);
    },
    CORPUS_TIMEOUT_MS,
  );

  it(
    `random tokens of 12-16 characters: at most ${SHORT_TOKEN_MAX_PASSED} of ${SHORT_TOKEN_DRAWS} fresh draws pass an identifier, an operation or a reason code field`,
    () => {
      const redact = auditRedactor(plain);
      const over: string[] = [];
      for (const [name, make] of PERSONAL_FORMATS) {
        if (!SHORT_TOKEN.test(name)) continue;
        for (const field of ['resourceId', 'operation', 'reasonCode'] as const) {
          let passed = 0;
          for (let i = 0; i < SHORT_TOKEN_DRAWS; i++) {
            const v = make();
            if (JSON.stringify(redact(event({ [field]: v }))).includes(v)) passed++;
          }
          if (passed > SHORT_TOKEN_MAX_PASSED) over.push(`${name} as ${field}: ${passed} of ${SHORT_TOKEN_DRAWS}`);
        }
      }
      expect(over).toEqual([]);
      // The tokens a `/` cuts into short words: refused when a word mixes the cases as tokens do.
      for (const v of [
        'LFAHwMtDHMJ/YRMN',
        'PXBLIF/fGXYOeYKU',
        'OC3/SKCdZFWV/AGD',
        'Ff/KDUDOFOULz8/9',
        'VWLUb/0tLFJYVVLV',
      ]) {
        expect(redact(event({ resourceId: v })).resourceId, v).toMatch(/^hmac:k1:/);
      }
      // Paths of ids keep passing.
      for (const v of [
        'US/NY/NYC/10001',
        'acme/Orders/2024',
        'OrderService/CreateOrder',
        'refs/heads/feature/ABC-123',
      ]) {
        expect(redact(event({ resourceId: v })).resourceId, v).toBe(v);
      }
    },
    CORPUS_TIMEOUT_MS,
  );

  it('a recognised provider token is never told in clear, however ordinary its body looks', () => {
    const redact = auditRedactor(plain);
    const letters = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
    const alnum = `${letters}0123456789`;
    const draw = (chars: string, n: number) => Array.from(randomBytes(n), (b) => chars[b % chars.length]).join('');
    const tokens: [string, () => string][] = [
      ['GitLab', () => `glpat-${draw(letters, 20)}`],
      ['Stripe', () => `sk_live_${draw(letters, 24)}`],
      ['Stripe webhook', () => `whsec_${draw(letters, 32)}`],
      ['GitHub', () => `ghp_${draw(alnum, 36)}`],
      ['Anthropic', () => `sk-ant-${draw(letters, 24)}`],
      ['Google', () => `AIza${draw(alnum, 35)}`],
      ['npm', () => `npm_${draw(alnum, 36)}`],
      ['AWS', () => `AKIA${draw('ABCDEFGHIJKLMNOPQRSTUVWXYZ234567', 16)}`],
    ];
    // A body in a camelCase word's shape, which the word grammar alone let through.
    const seen = ['glpat-oPearHfajymKddiIzdtj'];
    for (const [, make] of tokens) for (let i = 0; i < 300; i++) seen.push(make());
    const passed: string[] = [];
    for (const v of seen) {
      for (const field of ID_FIELDS) {
        if (JSON.stringify(redact(event({ [field]: v }))).includes(v)) passed.push(`${field}: ${v}`);
      }
    }
    expect(passed).toEqual([]);
    // Inside a longer id too: at its end, and between separators.
    for (const v of ['build:glpat-oPearHfajymKddiIzdtj', 'acme/sk_live_AbcdefghijKlmnopqrstUvwx/charge']) {
      expect(redact(event({ resourceId: v })).resourceId, v).toMatch(/^hmac:k1:/);
    }
    // A prefix alone, or a body the scanner does not take for a token, is no token.
    for (const v of ['sk-learn-model', 'npm_cache', 'task-sk-42']) {
      expect(redact(event({ resourceId: v })).resourceId, v).toBe(v);
    }
  });

  it('a verdict a policy remembers is its own: a value one policy declares stays a reference under another, however often seen', () => {
    const value = 'task-abc-9f3b2c8d1e0a';
    const clear = auditRedactor(declared);
    const referenced = auditRedactor(plain);
    for (let i = 0; i < 3; i++) {
      expect(clear(event({ taskId: value })).taskId).toBe(value);
      expect(referenced(event({ taskId: value })).taskId).toMatch(/^hmac:k1:/);
    }
    // A resource id in the bounded key form passes only in the library's own events about a key.
    const key = boundedKey({
      namespace: 'acme/orders',
      resourceKey: Array(40).fill('line-item').join('.'),
      version: 'v1',
    });
    expect(key).toContain('#');
    const own = { actorType: 'system', resourceType: 'idempotency_key', resourceId: key } as const;
    for (let i = 0; i < 3; i++) {
      expect(referenced(event(own)).resourceId).toBe(key);
      expect(referenced(event({ ...own, actorType: 'agent' })).resourceId).toMatch(/^hmac:k1:/);
      expect(referenced(event({ ...own, resourceType: 'order' })).resourceId).toMatch(/^hmac:k1:/);
    }
  });
});
