import { createHash } from 'node:crypto';
import { Writable } from 'node:stream';
import fc from 'fast-check';
import pino from 'pino';
import { beforeAll, describe, expect, it } from 'vitest';
import { IdempotencyConfigError } from '../../src/errors/errors.js';
import {
  DEFAULT_REDACTION_POLICY,
  defineRedactionPolicy,
  identifierRef,
  isMasked,
  maskPii,
  mergeReceipts,
  normalizeName,
  OMITTED_KEY,
  type RedactionPolicy,
  type RedactionPolicyInput,
  type RedactionReceipt,
  redact,
  redactDetails,
  redactError,
  redactString,
  verifyRef,
} from '../../src/redaction/index.js';
import { pinoRedactionOptions, pinoRedactPaths } from '../../src/scanners/pino/pino.js';
import {
  CANARIES,
  type Canary,
  canaryPayload,
  canaryText,
  FIELD_CANARIES,
  findCanaries,
  SCANNABLE_CANARIES,
} from '../fixtures/canaries.js';
import { medianCpuMs } from '../helpers/cpu-time.js';

const KEY_1 = 'test-hmac-key-one-0123456789abcdef0123456789';
const KEY_2 = 'test-hmac-key-two-fedcba9876543210fedcba9876';

function policyWith(extra: Partial<RedactionPolicyInput> = {}): RedactionPolicy {
  return defineRedactionPolicy({ version: 'test-1', hmacKeys: [{ id: 'k1', secret: KEY_1 }], ...extra });
}

const policy = policyWith({
  details: { 'payments.charge': ['amount', 'currency', 'customer_email'], '*': ['reason'] },
});

/** Everything a redaction produced, as one text to search for canaries. */
function dump(...values: unknown[]): string {
  return JSON.stringify(values);
}

/** Puts `value` under `field` inside `depth` levels of wrappers, alternating objects and arrays. */
function nestAt(depth: number, field: string, value: unknown): { root: Record<string, unknown>; path: string } {
  let node: Record<string, unknown> = { [field]: value };
  let path = `.${field}`;
  for (let d = depth; d > 0; d--) {
    if (d % 2 === 0) {
      node = { items: [{ id: `i${d}` }, node] };
      path = `.items[1]${path}`;
    } else {
      node = { [`level${d}`]: node, harmless: 'ord_123' };
      path = `.level${d}${path}`;
    }
  }
  return { root: node, path: `$${path}` };
}

function expectNoCanary(text: string): void {
  expect(findCanaries(text)).toEqual([]);
}

describe('canary corpus', () => {
  it('holds at least 50 distinct canaries with unique ids', () => {
    expect(CANARIES.length).toBeGreaterThanOrEqual(50);
    expect(new Set(CANARIES.map((c) => c.id)).size).toBe(CANARIES.length);
    expect(new Set(CANARIES.map((c) => c.value)).size).toBe(CANARIES.length);
    for (const c of CANARIES) expect(c.needles.length).toBeGreaterThan(0);
  });

  it('finds every canary in the unredacted payload (the detector works)', () => {
    const p = canaryPayload();
    const raw = dump(p.input, p.details, p.result, p.error.message, p.error.stack, (p.error.cause as Error).message);
    expect(findCanaries(raw).sort()).toEqual(CANARIES.map((c) => c.id).sort());
  });

  it('finds nothing in ordinary text', () => {
    expect(findCanaries('order ord_123 for task:42 charged 1234.56 EUR on 2025-06-01T10:20:30Z')).toEqual([]);
  });
});

describe('redacting the canary payload', () => {
  it('leaves no canary in input, details, result or error, and none in the receipts', () => {
    const p = canaryPayload();
    const input = redact(p.input, policy);
    const details = redact(p.details, policy);
    const result = redact(p.result, policy);
    const error = redactError(p.error, policy);
    expectNoCanary(dump(input, details, result, error));
    expect(error.cause?.message).toContain('[redacted:url_credentials]');
  });

  it('leaves no canary with the default policy either', () => {
    const p = canaryPayload();
    const out = [p.input, p.details, p.result].map((v) => redact(v, DEFAULT_REDACTION_POLICY));
    expectNoCanary(dump(out, redactError(p.error, DEFAULT_REDACTION_POLICY)));
  });
});

describe('field classes', () => {
  const classOf = (c: Canary) => {
    switch (c.kind) {
      case 'identifier':
        return 'identifier';
      case 'credential_ref':
        return 'credential_ref';
      case 'prompt':
      case 'conversation':
      case 'upload':
        return 'content';
      case 'password':
      case 'api_key':
      case 'cookie':
      case 'private_key':
        return 'secret';
      default:
        return 'pii';
    }
  };

  it.each(FIELD_CANARIES.map((c) => [c.id, c] as const))('%s is redacted under its field at every depth', (_id, c) => {
    for (let depth = 0; depth <= 5; depth++) {
      const { root, path } = nestAt(depth, c.field!, c.value);
      const { value, receipt } = redact(root, policy);
      expectNoCanary(dump(value, receipt));
      expect(receipt.rules).toContain(`field.${classOf(c)}`);
      expect(receipt.paths).toContain(path);
      expect(receipt.policyVersion).toBe('test-1');
    }
  });

  it('drops secret fields and lists them in the receipt', () => {
    const { value, receipt } = redact({ password: 'hunter22', nested: { apiKey: 'abc', keep: 1 } }, policy);
    expect(value).toEqual({ nested: { keep: 1 } });
    expect(receipt.paths).toEqual(['$.password', '$.nested.apiKey']);
    expect(receipt.counts).toEqual({ 'field.secret': 2 });
  });

  it('matches names regardless of case and separators', () => {
    for (const name of ['apiKey', 'api_key', 'API-KEY', 'Api Key', 'x-api-key', 'STRIPE_API_KEY']) {
      expect(redact({ [name]: 'value-1' }, policy).value).toEqual({});
    }
    expect(normalizeName('API-KEY')).toBe('apikey');
  });

  it('keeps LLM usage counters that merely contain "token"', () => {
    const usage = { maxTokens: 1024, inputTokens: 310, tokenCount: 12, tokens: 99 };
    expect(redact(usage, policy).value).toBe(usage);
  });

  it('masks personal data by shape', () => {
    const { value } = redact(
      {
        email: 'jane.doe@example.com',
        cardNumber: '4242 4242 4242 4242',
        phone: '+1 (415) 555-1234',
        firstName: 'Jane',
        dateOfBirth: '1990-02-01',
        ssn: 123456789,
        address: { street: '1 Main St', city: 'Springfield' },
        middleName: 'Q',
      },
      policy,
    );
    expect(value).toEqual({
      email: 'j***@example.com',
      cardNumber: '…4242',
      phone: '…1234',
      firstName: 'J***',
      dateOfBirth: '***',
      ssn: '…6789',
      address: { street: '1***', city: 'S***' },
      middleName: '***',
    });
  });

  it('summarises content as { bytes, hash, type } with a keyed hash', () => {
    const prompt = 'Résumé the meeting with Dr. Ng';
    const { value } = redact({ prompt, messages: [{ role: 'user', content: 'hi' }] }, policy);
    const out = value as { prompt: Record<string, unknown>; messages: Record<string, unknown> };
    expect(Object.keys(out.prompt).sort()).toEqual(['bytes', 'hash', 'type']);
    expect(out.prompt.bytes).toBe(Buffer.byteLength(prompt));
    expect(out.prompt.type).toBe('text');
    expect(out.prompt.hash).toMatch(/^hmac:k1:[A-Za-z0-9_-]{43}$/);
    expect(out.messages.type).toBe('array');
    // A plain SHA-256 would let anyone confirm a guessed prompt; the keyed hash does not match it.
    expect(out.prompt.hash).not.toContain(createHash('sha256').update(prompt).digest('base64url'));
    expect(redact({ prompt }, policy).value).toEqual({ prompt: out.prompt });
    expect(redact({ prompt }, policyWith({ hmacKeys: [{ id: 'k1', secret: KEY_2 }] })).value).not.toEqual({
      prompt: out.prompt,
    });
  });

  it('turns credential references into short opaque refs', () => {
    const { value, receipt } = redact({ vaultPath: 'secret/data/stripe' }, policy);
    expect((value as { vaultPath: string }).vaultPath).toMatch(/^ref:k1:[A-Za-z0-9_-]{22}$/);
    expect(receipt.rules).toEqual(['field.credential_ref']);
    expect(verifyRef((value as { vaultPath: string }).vaultPath, 'secret/data/stripe', policy)).toBe(true);
  });

  it('applies path rules: user.name is personal, tool.name is not', () => {
    const { value } = redact({ user: { name: 'Jane Doe' }, tool: { name: 'stripe.charge' }, name: 'Bob' }, policy);
    expect(value).toEqual({ user: { name: 'J***' }, tool: { name: 'stripe.charge' }, name: 'B***' });
    const custom = policyWith({ fields: { identifier: ['order.reference'] } });
    const out = redact({ order: { reference: 'R-1' }, shipment: { reference: 'S-1' } }, custom).value as {
      order: { reference: string };
      shipment: { reference: string };
    };
    expect(out.order.reference).toMatch(/^hmac:k1:/);
    expect(out.shipment.reference).toBe('S-1');
  });

  it('lets an allow rule exempt a field from its class but not from the scanners', () => {
    const allowing = policyWith({ allow: ['nextPageToken'] });
    const { value } = redact({ nextPageToken: 'cGFnZTI=', csrfToken: 'x', other: { nextPageToken: 'ghp_' } }, allowing);
    expect(value).toEqual({ nextPageToken: 'cGFnZTI=', other: { nextPageToken: 'ghp_' } });
    const jwt = CANARIES.find((c) => c.id === 'jwt-rs256')!.value;
    expect(redact({ nextPageToken: jwt }, allowing).value).toEqual({ nextPageToken: '[redacted:jwt]' });
  });

  it('uses only the policy’s own rules when includeDefaults is false', () => {
    const bare = policyWith({ includeDefaults: false, fields: { secret: ['pin'] } });
    expect(redact({ password: 'p', pin: '1234' }, bare).value).toEqual({ password: 'p' });
    expect(bare.fields.secret).toEqual(['pin']);
  });
});

describe('HMAC references', () => {
  const rotated = defineRedactionPolicy({
    version: 'test-2',
    hmacKeys: [
      { id: 'k2', secret: KEY_2 },
      { id: 'k1', secret: KEY_1 },
    ],
  });

  it('are stable for one key, differ across keys and record the key id', () => {
    const a = redact({ userId: 'usr_42' }, policy);
    const b = redact({ userId: 'usr_42' }, policy);
    const c = redact({ userId: 'usr_42' }, rotated);
    expect(a.value).toEqual(b.value);
    const refA = (a.value as { userId: string }).userId;
    const refC = (c.value as { userId: string }).userId;
    expect(refA).toMatch(/^hmac:k1:[A-Za-z0-9_-]{43}$/);
    expect(refC).toMatch(/^hmac:k2:/);
    expect(refA.slice(8)).not.toBe(refC.slice(8));
    expect(a.receipt.keyIds).toEqual(['k1']);
    expect(c.receipt.keyIds).toEqual(['k2']);
    expect(identifierRef('usr_42', policy)).toBe(refA);
  });

  it('are never a plain hash of the value', () => {
    const ref = identifierRef('jane@example.com', policy);
    for (const enc of ['hex', 'base64', 'base64url'] as const) {
      expect(ref).not.toContain(createHash('sha256').update('jane@example.com').digest(enc));
    }
  });

  it('made with a rotated-out key are recognised, kept and verifiable', () => {
    const before = redact({ userId: 'usr_42', prompt: 'hello there' }, policy).value;
    const { value, receipt } = redact(before, rotated);
    expect(value).toEqual(before);
    expect(receipt.keyIds).toEqual(['k1']);
    expect(receipt.rules).toEqual([]);
    const ref = (before as { userId: string }).userId;
    expect(verifyRef(ref, 'usr_42', rotated)).toBe(true);
    expect(verifyRef(ref, 'usr_43', rotated)).toBe(false);
    // A new value gets the current key; both ids show in the receipt.
    const mixed = redact({ ...(before as object), customerId: 'cus_1' }, rotated);
    expect(mixed.receipt.keyIds).toEqual(['k1', 'k2']);
  });

  it('with an unknown key id are not trusted and are hashed again', () => {
    const foreign = identifierRef('usr_42', policyWith({ hmacKeys: [{ id: 'kx', secret: KEY_2 }] }));
    const out = redact({ userId: foreign }, policy).value as { userId: string };
    expect(out.userId).toMatch(/^hmac:k1:/);
    expect(verifyRef(foreign, 'usr_42', policy)).toBe(false);
  });
});

describe('value scanners', () => {
  it.each(SCANNABLE_CANARIES.map((c) => [c.id, c] as const))('%s is found in free text anywhere', (_id, c) => {
    const text = canaryText(c);
    expectNoCanary(redactString(text, policy));
    // A value that is a secret only in its sentence (`password=…`) is not recognisable alone.
    const selfIdentifying = c.text === undefined || c.text === c.value;
    if (selfIdentifying) expectNoCanary(redactString(c.value, policy));
    for (let depth = 0; depth <= 4; depth++) {
      const { root, path } = nestAt(depth, 'note', text);
      const { value, receipt } = redact(root, policy);
      expectNoCanary(dump(value, receipt));
      expect(receipt.paths).toContain(path);
      expect(receipt.rules.some((r) => r.startsWith('scan.'))).toBe(true);
    }
    if (selfIdentifying) expectNoCanary(dump(redact([c.value, { v: [c.value] }], policy)));
    const err = new Error(`step failed: ${text}`, { cause: new TypeError(text) });
    expectNoCanary(dump(redactError(err, policy)));
  });

  it('replaces matches with typed markers', () => {
    const jwt = CANARIES.find((c) => c.id === 'jwt-hs256')!.value;
    const out = redactString(
      `token ${jwt}. Mail ann.lee@example.org, card 4539 8073 9823 7388, iban DE27 5001 0517 6986 3020 04, ` +
        'call +44 20 7946 0958 or (415) 555-0199, key ghp_ujbRca1AvYoSX7AglCZYy2KNMAedF5yfFcma',
      policy,
    );
    expect(out).toBe(
      'token [redacted:jwt]. Mail a***@example.org, card [card …7388], iban [iban DE…2004], ' +
        'call [phone …0958] or [phone …0199], key [redacted:github_token]',
    );
  });

  it('names the provider of each token', () => {
    const rule = (id: string) => {
      const c = CANARIES.find((x) => x.id === id)!;
      return redact({ note: canaryText(c) }, policy).receipt.rules;
    };
    expect(rule('github-classic-pat')).toEqual(['scan.github_token']);
    expect(rule('github-fine-grained-pat')).toEqual(['scan.github_token']);
    expect(rule('gitlab-pat')).toEqual(['scan.gitlab_token']);
    expect(rule('slack-bot-token')).toEqual(['scan.slack_token']);
    expect(rule('stripe-webhook-secret')).toEqual(['scan.stripe_key']);
    expect(rule('openai-project-key')).toEqual(['scan.openai_key']);
    expect(rule('anthropic-key')).toEqual(['scan.anthropic_key']);
    expect(rule('aws-access-key-id')).toEqual(['scan.aws_access_key_id']);
    expect(rule('aws-secret-access-key')).toEqual(['scan.aws_secret_key']);
    expect(rule('pem-rsa-private-key')).toEqual(['scan.private_key']);
    expect(rule('basic-auth')).toEqual(['scan.basic_auth']);
    expect(rule('database-url-password')).toEqual(['scan.url_credentials']);
  });

  it('keeps the JSON around a scrubbed pair well-formed', () => {
    const text = JSON.stringify({ client_secret: 'f8Kq2Zr7Vb1Nw4Xy6Tp3Ls9H', password: 'Quokka-Lantern-5521' });
    const out = redactString(text, policy);
    expect(JSON.parse(out)).toEqual({ client_secret: '[redacted:secret_pair]', password: '[redacted:secret_pair]' });
    const escaped = JSON.stringify({ log: text });
    expect(JSON.parse(JSON.parse(redactString(escaped, policy)).log)).toEqual({
      client_secret: '[redacted:secret_pair]',
      password: '[redacted:secret_pair]',
    });
  });

  it('scans object keys and card numbers stored as numbers', () => {
    const { value, receipt } = redact(
      { 'jane.doe@example.com': { visits: 3 }, ref: 4539807398237388, amount: 4242 },
      policy,
    );
    expect(value).toEqual({ 'j***@example.com': { visits: 3 }, ref: '[card …7388]', amount: 4242 });
    expect(receipt.paths).toEqual(['$["j***@example.com"]', '$.ref']);
  });

  it('finds a card inside a longer run of digit groups', () => {
    expect(redactString('ref 4539-8073-9823-7388-99 end', policy)).toBe('ref [card …7388]-99 end');
    expect(redactString('qty 2 4539 8073 9823 7388', policy)).toBe('qty 2 [card …7388]');
    expect(redactString('call (415) 555-0199 4539 8073 9823 7388', policy)).toBe('call [phone …0199] [card …7388]');
  });
});

describe('false positives', () => {
  const sha256 = createHash('sha256').update('x').digest('hex');
  const harmless = [
    'ord_123',
    'task:42',
    'acme/assets.create:task:42:v3',
    '550e8400-e29b-41d4-a716-446655440000',
    '2a7f0d83-4716-4539-8073-982373884242',
    '2025-06-01T10:20:30.123Z',
    '2025-06-01 10:20:30+02:00',
    '2025-06-01',
    '01/06/2025',
    'shutdown deadline passed: force-closing the workers',
    'reviewed by the author: see ticket 1234',
    '1234.56',
    '1,234,567.89 EUR',
    '4242',
    '42',
    '-17',
    '1700000000000',
    'v1.2.3',
    'react@18.2.0',
    '192.168.100.200',
    'https://example.com/a/b?c=d&page=2',
    sha256,
    `sha256:${sha256}`,
    'max_tokens=1024',
    'token_type=Bearer',
    'password_length: 12',
    'auth: required',
    'Token expired.',
    'the bearer of bad news',
    'basic information retrieval',
    'scikit sk-learn pipeline',
    'The customer asked us to retry the shipment tomorrow morning, after the warehouse opens.',
    'Order #12345 shipped in 3 boxes; tracking 1Z999AA10123456784.',
    'hmac:k1:not-a-real-ref',
  ];

  it.each(harmless)('leaves %s unchanged', (text) => {
    expect(redactString(text, policy)).toBe(text);
    const event = { value: text, nested: [{ value: text }] };
    const { value, receipt } = redact(event, policy);
    expect(value).toBe(event);
    expect(receipt.rules).toEqual([]);
  });

  it('leaves numbers, booleans and nulls alone', () => {
    const event = { amount: 4242, total: 1234.56, when: 1_700_000_000_000, ok: true, none: null, n: -1 };
    expect(redact(event, policy).value).toBe(event);
  });

  it('flags a hex digest only when it sits in a secret-named field or pair', () => {
    expect(redact({ digest: sha256 }, policy).value).toEqual({ digest: sha256 });
    expect(redact({ token: sha256 }, policy).value).toEqual({});
    expect(redactString(`token=${sha256}`, policy)).toBe('token=[redacted:secret_pair]');
  });

  it('returns the very same object when nothing needs redaction', () => {
    const event = { a: { b: [1, 'two', { c: 'three' }] }, d: 'ord_123' };
    expect(redact(event, policy).value).toBe(event);
  });
});

describe('details allow-list', () => {
  it('keeps allow-listed keys (redacted), summarises the rest, fails closed', () => {
    const { value, receipt } = redactDetails(
      'payments.charge',
      {
        amount: 12.5,
        currency: 'EUR',
        customerEmail: 'jane@example.com',
        reason: 'card ghp_ujbRca1AvYoSX7AglCZYy2KNMAedF5yfFcma',
        note: 'call me',
        internalScore: 0.7,
        'jane@example.com': true,
        a8f3c9d2e1b4f6a7c0d9: 1,
      },
      policy,
    );
    expect(value).toEqual({
      amount: 12.5,
      currency: 'EUR',
      customerEmail: 'j***@example.com',
      reason: 'card [redacted:github_token]',
      [OMITTED_KEY]: { count: 4 },
    });
    expect(receipt.counts['details.omitted']).toBe(4);
    expect(dump(value, receipt)).not.toContain('jane@');
  });

  it('keeps nothing for an action the policy does not list, except the global allow-list', () => {
    const { value } = redactDetails('crm.delete', { reason: 'duplicate', amount: 1, foo: 2 }, policy);
    expect(value).toEqual({ reason: 'duplicate', [OMITTED_KEY]: { count: 2 } });
  });

  it('is idempotent and merges an earlier summary', () => {
    const once = redactDetails('payments.charge', { amount: 1, foo: 2, bar: 3 }, policy).value;
    const twice = redactDetails('payments.charge', once, policy).value;
    expect(twice).toEqual(once);
  });

  it('handles missing details', () => {
    expect(redactDetails('payments.charge', undefined, policy).value).toEqual({});
  });

  it('keeps an allow-listed `__proto__` key as an own key, never as the prototype', () => {
    const own = defineRedactionPolicy({
      version: 'proto-1',
      hmacKeys: [{ id: 'k1', secret: 'p'.repeat(40) }],
      details: { 'tool.x': ['__proto__'] },
    });
    const { value } = redactDetails('tool.x', JSON.parse('{"__proto__":{"polluted":true},"other":1}'), own);
    expect(Object.getPrototypeOf(value)).toBe(Object.prototype);
    expect(Object.hasOwn(value, '__proto__')).toBe(true);
    expect(value.polluted).toBeUndefined();
    expect(JSON.parse(JSON.stringify(value))).toEqual(
      JSON.parse('{"__proto__":{"polluted":true},"_omitted":{"count":1}}'),
    );
  });
});

describe('receipts', () => {
  it('list rules, paths and counts, never values', () => {
    const { receipt } = redact(
      {
        user: { email: 'ann@example.org', userId: 'u1' },
        notes: ['ghp_ujbRca1AvYoSX7AglCZYy2KNMAedF5yfFcma and ghs_mwfLvI8OJHf6X3A75B4jLqzpv4dLqfZYBLw1'],
        password: 'x',
      },
      policy,
      { rootPath: '$.details' },
    );
    expect(receipt).toEqual({
      policyVersion: 'test-1',
      rules: ['field.identifier', 'field.pii', 'field.secret', 'scan.github_token'],
      paths: ['$.details.user.email', '$.details.user.userId', '$.details.notes[0]', '$.details.password'],
      counts: { 'field.identifier': 1, 'field.pii': 1, 'field.secret': 1, 'scan.github_token': 2 },
      keyIds: ['k1'],
    } satisfies RedactionReceipt);
  });

  it('carry no canary', () => {
    const p = canaryPayload();
    const receipts = [p.input, p.details, p.result].map((v) => redact(v, policy).receipt);
    expectNoCanary(dump(receipts, mergeReceipts(receipts[0]!, ...receipts.slice(1))));
  });

  it('are capped at maxReceiptPaths', () => {
    const small = policyWith({ limits: { maxReceiptPaths: 2 } });
    const { receipt } = redact({ a: { password: 1 }, b: { password: 1 }, c: { password: 1 } }, small);
    expect(receipt.paths).toEqual(['$.a.password', '$.b.password']);
    expect(receipt.truncated).toBe(true);
    expect(receipt.counts['field.secret']).toBe(3);
  });

  it('merge', () => {
    const a = redact({ password: 1 }, policy).receipt;
    const b = redact({ note: 'mail ann@example.org', userId: 'u' }, policy, { rootPath: '$.result' }).receipt;
    expect(mergeReceipts(a, b)).toEqual({
      policyVersion: 'test-1',
      rules: ['field.identifier', 'field.secret', 'scan.email'],
      paths: ['$.password', '$.result.note', '$.result.userId'],
      counts: { 'field.identifier': 1, 'field.secret': 1, 'scan.email': 1 },
      keyIds: ['k1'],
    });
  });

  it('are built with their keys in sorted order, as the audit chain hashes them without building them again', () => {
    const sortedKeys = (o: object) => {
      const keys = Object.keys(o);
      return keys.every((k, i) => i === 0 || (keys[i - 1] as string) < k);
    };
    const small = policyWith({ limits: { maxReceiptPaths: 1 } });
    const receipts = [
      redact({ a: { password: 1 }, b: { password: 1 }, note: 'mail ann@example.org', userId: 'u' }, small).receipt,
      redact({ note: 'card 4539 8073 9823 7388, ann@example.org', token: 'x' }, policy).receipt,
      redact({ nothing: 'here' }, policy).receipt,
    ];
    expect(receipts[0]?.truncated).toBe(true);
    for (const r of [...receipts, mergeReceipts(receipts[0]!, ...receipts.slice(1))]) {
      expect(sortedKeys(r)).toBe(true);
      expect(sortedKeys(r.counts)).toBe(true);
    }
  });
});

describe('errors', () => {
  it('keep name, safe code, scrubbed message, stack and cause', () => {
    const cause = Object.assign(new Error('dial postgres://app:hunter2@db:5432/x'), { code: 'ECONNREFUSED' });
    const err = Object.assign(new TypeError('bad input from ann@example.org', { cause }), { code: 42 });
    const out = redactError(err, policy);
    expect(out.name).toBe('TypeError');
    expect(out.code).toBe('42');
    expect(out.message).toBe('bad input from a***@example.org');
    expect(out.stack).toMatch(/^TypeError: bad input from a\*\*\*@example\.org\n/);
    expect(out.cause).toMatchObject({
      name: 'Error',
      code: 'ECONNREFUSED',
      message: 'dial postgres://app:[redacted:url_credentials]@db:5432/x',
    });
    expect(redactError(err, policy, { stack: false })).not.toHaveProperty('stack');
  });

  it('drop a code that looks like a secret and a name that is not an identifier', () => {
    const err = Object.assign(new Error('x'), { code: 'sk_test_jAgoDMFynaCWtUjewXBDJ5qC', name: 'Bad name!' });
    const out = redactError(err, policy);
    expect(out).not.toHaveProperty('code');
    expect(out.name).toBe('Error');
  });

  it('handle thrown strings and objects (field classes apply)', () => {
    expect(redactError('failed for ann@example.org', policy)).toEqual({
      name: 'Error',
      message: 'failed for a***@example.org',
    });
    const out = redactError({ password: 'hunter22', user: { email: 'ann@example.org' } }, policy);
    expect(out.name).toBe('NonError');
    expect(out.message).toBe('{"user":{"email":"a***@example.org"}}');
    expect(redactError(undefined, policy)).toEqual({ name: 'NonError', message: 'undefined' });
  });

  it('cut very long messages at whitespace and mark the cut', () => {
    const long = `${'word '.repeat(20_000)}ghp_ujbRca1AvYoSX7AglCZYy2KNMAedF5yfFcma`;
    const out = redactError(new Error(long), policy, { stack: false });
    expect(out.message.length).toBeLessThan(70_000);
    expect(out.message).toMatch(/…\[truncated \d+ chars\]$/);
    expect(out.message).not.toContain('ghp_');
  });

  it('scrub errors nested inside values', () => {
    const { value } = redact({ failure: new Error('token ghp_ujbRca1AvYoSX7AglCZYy2KNMAedF5yfFcma') }, policy);
    expect((value as { failure: { message: string } }).failure.message).toBe('token [redacted:github_token]');
  });
});

describe('limits', () => {
  it('replace oversized strings with a content summary', () => {
    const big = 'x'.repeat(70_000);
    const { value, receipt } = redact({ log: big }, policy);
    expect(value).toEqual({ log: { bytes: 70_000, hash: expect.stringMatching(/^hmac:k1:/), type: 'text' } });
    expect(receipt.rules).toEqual(['limit.oversize']);
  });

  it('replace values nested too deep', () => {
    const shallow = policyWith({ limits: { maxDepth: 3 } });
    const { value, receipt } = redact({ a: { b: { c: { d: 'x' } } } }, shallow);
    expect(value).toEqual({ a: { b: { c: '[redacted:depth]' } } });
    expect(receipt.rules).toEqual(['limit.depth']);
  });

  it('survive cycles', () => {
    const a: Record<string, unknown> = { email: 'ann@example.org' };
    a.self = a;
    const { value, receipt } = redact(a, policy);
    expect(value).toEqual({ email: 'a***@example.org', self: '[redacted:cycle]' });
    expect(receipt.rules).toContain('limit.cycle');
  });

  it('summarise binary data and convert Maps, Sets and class instances', () => {
    class Point {
      constructor(
        readonly x: number,
        readonly password: string,
      ) {}
    }
    const { value } = redact(
      {
        file: Buffer.from('secret bytes'),
        m: new Map([['email', 'ann@example.org']]),
        s: new Set(['ann@example.org']),
        p: new Point(1, 'pw'),
        at: new Date(0),
        big: 4539807398237388n,
      },
      policy,
    );
    expect(value).toEqual({
      file: { bytes: 12, hash: expect.stringMatching(/^hmac:k1:/), type: 'binary' },
      m: { email: 'a***@example.org' },
      s: ['a***@example.org'],
      p: { x: 1 },
      at: new Date(0),
      big: '[card …7388]',
    });
  });
});

describe('policy', () => {
  const bad = (input: unknown): IdempotencyConfigError => {
    try {
      defineRedactionPolicy(input as RedactionPolicyInput);
    } catch (err) {
      expect(err).toBeInstanceOf(IdempotencyConfigError);
      expect((err as IdempotencyConfigError).code).toBe('IDEMPOTENCY_CONFIG');
      return err as IdempotencyConfigError;
    }
    throw new Error('expected the policy to be refused');
  };

  it('refuses a policy without keys, with a short key or duplicate key ids', () => {
    expect(bad({ version: 'v1', hmacKeys: [] }).message).toContain('hmacKeys');
    expect(bad({ version: 'v1', hmacKeys: [{ id: 'k', secret: 'short' }] }).message).toContain('32 bytes');
    expect(
      bad({
        version: 'v1',
        hmacKeys: [
          { id: 'k', secret: KEY_1 },
          { id: 'k', secret: KEY_2 },
        ],
      }).message,
    ).toContain('unique');
    expect(bad({ hmacKeys: [{ id: 'k', secret: KEY_1 }] }).message).toContain('version');
  });

  it('refuses bad patterns, conflicting classes, unknown options and the reserved details key', () => {
    const base = { version: 'v1', hmacKeys: [{ id: 'k1', secret: KEY_1 }] };
    expect(bad({ ...base, fields: { pii: ['*a.b'] } }).message).toContain('fields.pii.0');
    expect(bad({ ...base, fields: { pii: ['a*b'] } }).message).toContain('first character');
    const conflict = bad({ ...base, fields: { pii: ['customerRef'], identifier: ['customer_ref'] } });
    expect(conflict.message).toContain('"customerRef" is also listed as identifier');
    expect(conflict.details.issues).toHaveLength(1);
    expect(bad({ ...base, allow: ['email'], fields: { pii: ['email'] } }).message).toContain('allow');
    expect(bad({ ...base, disabledScanners: ['nope'] }).message).toContain('disabledScanners');
    expect(bad({ ...base, extra: true }).message).toContain('extra');
    expect(bad({ ...base, details: { a: [OMITTED_KEY] } }).message).toContain('reserved');
  });

  it('refuses an object that is not a compiled policy', () => {
    expect(() => redact({}, { ...policy })).toThrow(IdempotencyConfigError);
  });

  it('exposes what it does but not its keys', () => {
    const text = `${JSON.stringify(policy)} ${String(Object.values(policy))}`;
    expect(text).not.toContain(KEY_1);
    expect(policy.keyIds).toEqual(['k1']);
    expect(policy.fields.secret).toContain('password');
    expect(policy.scanners).toContain('jwt');
    expect(Object.isFrozen(policy)).toBe(true);
  });

  it('lets a policy override a built-in class and switch scanners off', () => {
    const custom = policyWith({ fields: { identifier: ['name'] }, disabledScanners: ['phone'] });
    expect((redact({ name: 'Jane' }, custom).value as { name: string }).name).toMatch(/^hmac:k1:/);
    expect(redactString('call +44 20 7946 0958', custom)).toBe('call +44 20 7946 0958');
  });

  it('has a default policy with an ephemeral key', () => {
    expect(DEFAULT_REDACTION_POLICY.currentKeyId).toMatch(/^ephemeral-[0-9a-f]{8}$/);
    expect(redact({ password: 'x' }, DEFAULT_REDACTION_POLICY).value).toEqual({});
  });
});

describe('masks', () => {
  it.each([
    ['jane.doe@example.com', 'j***@example.com'],
    ['4242 4242 4242 4242', '…4242'],
    ['+1 (415) 555-1234', '…1234'],
    ['Jane', 'J***'],
    ['Jo', '***'],
    ['1990-02-01', '***'],
    ['DE27 5001 0517 6986 3020 04', '…2004'],
    ['Ærøskøbing', 'Æ***'],
    ['😀 smile', '😀***'],
  ])('%s → %s', (input, masked) => {
    expect(maskPii(input)).toBe(masked);
    expect(isMasked(masked)).toBe(true);
    expect(maskPii(masked)).toBe(masked);
  });
});

describe('linear time on adversarial input (ReDoS guard, not a benchmark)', () => {
  const N = 100_000;
  const wide = policyWith({ limits: { maxStringLength: 1 << 20 } });
  const fill =
    (unit: string, prefix = '', suffix = '') =>
    (n: number) =>
      prefix + unit.repeat(Math.ceil(n / unit.length)).slice(0, n - prefix.length - suffix.length) + suffix;
  const cases: [string, (n: number) => string][] = [
    ['letters', fill('a')],
    ['capitals', fill('A')],
    ['eyJ runs', fill('eyJ')],
    ['eyJ with dashes', fill('eyJ-')],
    ['eyJ with dots', fill('eyJaaaaaaaa.')],
    ['sk- runs', fill('sk-')],
    ['ghp_ runs', fill('ghp_')],
    ['AKIA runs', fill('AKIA')],
    ['BEGIN markers', fill('-----BEGIN ')],
    ['unterminated key', fill('A', '-----BEGIN PRIVATE KEY-----')],
    ['private key markers', fill('-----BEGIN PRIVATE KEY-----')],
    ['dashes', fill('-')],
    ['spaced digits', fill('1 ')],
    ['dashed digits', fill('1-')],
    ['digits', fill('1')],
    ['card-like groups', fill('4111 ')],
    ['at signs', fill('a@')],
    ['dotted local part', fill('a.', '', '@')],
    ['at-dot', fill('@a.')],
    ['long local part', fill('a', '', '@example.com')],
    ['long domain', fill('a', 'x@')],
    ['password= runs', fill('password=')],
    ['long password value', fill('x', 'password=')],
    ['name tail', fill('_', 'token')],
    ['json pairs', fill('"secret":"')],
    ['escaped json pairs', fill('\\"secret\\":\\"')],
    ['Bearer runs', fill('Bearer ')],
    ['long bearer token', fill('A', 'Bearer ')],
    ['bearer dots', fill('.', 'Bearer abcdefgh')],
    ['basic mixed', fill('Aa-', 'Basic ')],
    ['scheme separators', fill('://')],
    ['url user', fill('a', '://')],
    ['url password', fill('a', '://a:')],
    ['phone prefixes', fill('+1 ')],
    ['area codes', fill('(555) ')],
    ['zeros', fill('0')],
    ['IBAN prefixes', fill('DE89')],
    ['IBAN groups', fill('1234 ', 'DE89 ')],
    ['dots', fill('.')],
    ['mixed punctuation', fill('aA1-_.:=@ ')],
    ['aws names', fill('aws_secret_access_key=')],
  ];

  const run = (text: string) => {
    redactString(text, wide);
    redact({ v: text, [text.slice(0, 200)]: 1 }, wide);
  };
  // Warm the JIT and V8's regexp tier-up on short versions first: the bound is about growth with
  // length (exponential or quadratic blow-up), not about the cost of compiling cold code.
  beforeAll(() => {
    for (const [, text] of cases) run(text(4000));
  });

  // A quarter of the length against all of it, in CPU time: linear gives 4, quadratic 16. The
  // best of three (noise only ever slows one side); a floor of 0.1 ms against timer resolution.
  it.each(cases)('%s', (_name, text) => {
    expect(text(N).length).toBe(N);
    let best = Number.POSITIVE_INFINITY;
    for (let attempt = 0; attempt < 3 && best >= 8; attempt++) {
      const quarter = Math.max(
        medianCpuMs(() => text(N / 4), run, 3),
        0.1,
      );
      const full = Math.max(
        medianCpuMs(() => text(N), run, 3),
        0.1,
      );
      best = Math.min(best, full / quarter);
    }
    expect(best).toBeLessThan(8);
  });
});

describe('properties', () => {
  /** Strings built from fragments that scanners react to, to stress overlaps between them. */
  const fragment = fc.constantFrom(
    'a',
    'Z',
    '7',
    '4111',
    ' ',
    '-',
    '_',
    '.',
    '@',
    ':',
    '=',
    '"',
    '\\',
    '+',
    '(',
    ')',
    'eyJhbGciOiJIUzI1NiJ9',
    'sk_live_',
    'ghp_',
    'Bearer ',
    'Basic ',
    'password=',
    '://',
    'example.com',
    'DE89',
    '[redacted:jwt]',
    '***',
    '…',
    '4539 8073 9823 7388',
    '+44 20 7946 0958',
    'AKIA',
  );
  const sensitiveString = fc.array(fragment, { maxLength: 24 }).map((parts) => parts.join(''));
  const keyName = fc.oneof(
    fc.string(),
    fc.constantFrom('password', 'email', 'userId', 'prompt', 'name', 'tool', 'user', 'vaultPath', 'note', '__proto__'),
  );
  const json = fc.letrec((tie) => ({
    value: fc.oneof(
      { depthSize: 'small' },
      fc.jsonValue({ maxDepth: 2 }),
      sensitiveString,
      fc.array(tie('value'), { maxLength: 4 }),
      fc.dictionary(keyName, tie('value'), { maxKeys: 5 }),
    ),
  })).value;

  it('redact never throws on arbitrary JSON and is idempotent', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        const once = redact(value, policy).value;
        expect(redact(once, policy).value).toEqual(once);
      }),
      { numRuns: 300 },
    );
  });

  it('is idempotent on values full of scanner-bait and field names', () => {
    fc.assert(
      fc.property(json, (value) => {
        const once = redact(value, policy).value;
        expect(redact(once, policy).value).toEqual(once);
      }),
      { numRuns: 500 },
    );
  });

  it('redactString is idempotent', () => {
    fc.assert(
      fc.property(fc.oneof(sensitiveString, fc.string({ unit: 'binary' })), (text) => {
        const once = redactString(text, policy);
        expect(redactString(once, policy)).toBe(once);
      }),
      { numRuns: 1000 },
    );
  });
});

describe('pino integration', () => {
  function capture(options: pino.LoggerOptions): { logger: pino.Logger; lines: () => string } {
    let out = '';
    const stream = new Writable({
      write(chunk, _enc, done) {
        out += chunk.toString();
        done();
      },
    });
    return { logger: pino(options, stream), lines: () => out };
  }

  it('lists redact paths for the known field names in common spellings', () => {
    const paths = pinoRedactPaths(policy);
    expect(paths).toEqual(expect.arrayContaining(['password', '*.password', 'api_key', 'apiKey', 'apikey', '*.email']));
    expect(pinoRedactPaths(policyWith({ fields: { pii: ['recipient.name'] } }))).toContain('*.recipient.name');
    expect(paths).not.toContain('name');
    expect(paths).toContain('*.name');
    expect(pinoRedactPaths(policy, { classes: ['secret'], depth: 1 })).not.toContain('*.password');
  });

  it('logs no canary: objects, messages, errors and child bindings are scrubbed', () => {
    const { logger, lines } = capture({ ...pinoRedactionOptions(policy) });
    const p = canaryPayload();
    const texts = SCANNABLE_CANARIES.map(canaryText);
    logger.info({ input: p.input, details: p.details }, 'job input');
    logger.error({ err: p.error, result: p.result }, 'job failed');
    logger.warn(texts.join(' | '));
    logger.info('printf %s and %o', texts[0], { password: 'Tr0ub4dor&3-Wrenfield' });
    logger.child({ user: { email: 'ottilie.brandwine@fernhollow.example' } }).info({ prompt: 'Oswin Pellegrino' });
    logger.error(p.error);
    const log = lines();
    expect(log.split('\n').filter(Boolean)).toHaveLength(6);
    expectNoCanary(log);
    const failed = JSON.parse(log.split('\n')[1]!) as { err: { message: string; name: string } };
    expect(failed.err.name).toBe('Error');
    expect(failed.err.message).toContain('[redacted:github_token]');
  });

  it('scrubs the root logger’s base bindings but keeps pino’s own', () => {
    const { logger, lines } = capture({
      ...pinoRedactionOptions(policy),
      name: 'billing-worker',
      base: { pid: 7, hostname: 'worker-1', owner: 'wren.faulkner88@mailbox.example', password: 'x' },
    });
    logger.info('started');
    const line = JSON.parse(lines()) as Record<string, unknown>;
    expect(line).toMatchObject({ pid: 7, hostname: 'worker-1', name: 'billing-worker', owner: 'w***@mailbox.example' });
    expect(line).not.toHaveProperty('password');
  });

  it('redacts the output of your own serializers, which pino runs after formatters.log', () => {
    const token = 'ghp_ujbRca1AvYoSX7AglCZYy2KNMAedF5yfFcma';
    const req = (r: { url: string; auth: string; from: string }) => ({
      url: r.url,
      headers: { authorization: `Bearer ${token}`, from: r.from },
    });
    const { logger, lines } = capture({ ...pinoRedactionOptions(policy, { serializers: { req } }) });
    logger.info({ req: { url: '/orders', auth: token, from: 'jane.doe@example.com' } }, 'request');
    const line = lines();
    expect(line).not.toContain(token);
    expect(line).not.toContain('jane.doe@');
    expect(JSON.parse(line).req.url).toBe('/orders');
    // The library's own serializers stay: a message is still scanned.
    logger.info(`token ${token}`);
    expect(lines()).not.toContain(token);
  });

  it('lists top-level redact paths by default, deeper ones on request', () => {
    const paths = (o: ReturnType<typeof pinoRedactionOptions>) => (o.redact as { paths: string[] }).paths;
    expect(paths(pinoRedactionOptions(policy))).toContain('password');
    expect(paths(pinoRedactionOptions(policy))).not.toContain('*.password');
    expect(paths(pinoRedactionOptions(policy, { pathDepth: 2 }))).toContain('*.password');
  });

  it('censors a path with the class of its field', () => {
    const options = pinoRedactionOptions(policy);
    const censor = (options.redact as { censor: (v: unknown, p: string[]) => unknown }).censor;
    expect(censor('jane@example.com', ['user', 'email'])).toBe('j***@example.com');
    expect(censor('u1', ['userId'])).toBe(identifierRef('u1', policy));
    expect(censor('pw', ['password'])).toBe('[redacted:secret]');
  });
});
