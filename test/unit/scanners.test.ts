import { describe, expect, it } from 'vitest';
import { IdempotencyConfigError } from '../../src/errors/errors.js';
import {
  defineRedactionPolicy,
  normalizeName,
  type RedactionPolicy,
  type RedactionPolicyInput,
  redact,
  redactError,
  redactString,
} from '../../src/redaction/index.js';
import { pinoRedactionOptions } from '../../src/scanners/pino/pino.js';
import { type CorpusEntry, ordinaryCorpus, scannerCorpus } from '../fixtures/scanner-corpus.js';
import { capturePino } from '../helpers/pino-capture.js';

const KEY = 'scanner-test-hmac-key-0123456789abcdef0123';

function policyWith(extra: Partial<RedactionPolicyInput> = {}): RedactionPolicy {
  return defineRedactionPolicy({ version: 'scan-1', hmacKeys: [{ id: 'k1', secret: KEY }], ...extra });
}

const policy = policyWith();
const CORPUS = scannerCorpus();
const ORDINARY = ordinaryCorpus();

/** The places a secret shows up in: prose, a log line's key=value, JSON, a header, an error. */
const EMBEDDINGS: [string, (text: string) => string][] = [
  ['alone', (t) => t],
  ['prose', (t) => `while charging order 42 the upstream replied ${t} and we gave up`],
  ['key=value', (t) => `level=warn step=charge detail=${t} attempt=2`],
  ['json', (t) => JSON.stringify({ step: 'charge', detail: t, attempt: 2 })],
  ['header line', (t) => `X-Upstream-Note: ${t}\r\nX-Trace: 1`],
  ['multi-line', (t) => `first line\n${t}\nlast line`],
];

/** The needles (and, for `lower`, the lower-case needles) still present in `out`. */
function leaks(entry: CorpusEntry, out: string): string[] {
  const hay = out.toLowerCase();
  return entry.needles.filter((n) => hay.includes(n.toLowerCase()));
}

describe('scanner corpus', () => {
  it('covers at least 80 distinct formats, every category, and detects itself', () => {
    expect(new Set(CORPUS.map((e) => e.id)).size).toBe(CORPUS.length);
    expect(CORPUS.length).toBeGreaterThanOrEqual(80);
    const categories = new Set(CORPUS.map((e) => e.category));
    expect(categories.size).toBe(11);
    for (const e of CORPUS) {
      expect(e.needles.length, e.id).toBeGreaterThan(0);
      // The needles are in the raw text: the leak check can fail.
      expect(leaks(e, e.text), e.id).toEqual(e.needles);
    }
    expect(ORDINARY.length).toBeGreaterThanOrEqual(40);
  });
});

describe.each(CORPUS.map((e) => [e.id, e] as const))('%s', (_id, entry) => {
  it.each(EMBEDDINGS)('is gone from text: %s', (_name, embed) => {
    const text = embed(entry.text);
    const out = redactString(text, policy);
    expect(leaks(entry, out), out).toEqual([]);
    expect(out).not.toBe(text);
    expect(redactString(out, policy)).toBe(out);
  });

  it('is gone from object values, arrays and errors, and the receipt names a scanner', () => {
    const value = { step: 'charge', detail: entry.text, list: [entry.text], nested: { deeper: { note: entry.text } } };
    const { value: out, receipt } = redact(value, policy);
    const dumped = JSON.stringify([out, receipt]);
    expect(leaks(entry, dumped)).toEqual([]);
    expect(receipt.rules.some((r) => r.startsWith('scan.'))).toBe(true);
    const err = redactError(new Error(`failed: ${entry.text}`, { cause: new Error(entry.text) }), policy);
    expect(leaks(entry, JSON.stringify(err))).toEqual([]);
  });

  it('is gone from every pino call shape', () => {
    const { logger, lines } = capturePino({ ...pinoRedactionOptions(policy) });
    logger.info(entry.text);
    logger.info(`interpolated ${entry.text}`);
    logger.info('printf %s done', entry.text);
    logger.info('object %o and json %j', { detail: entry.text }, { detail: entry.text });
    logger.info({ detail: entry.text }, 'merging object');
    logger.info({ err: new Error(entry.text) }, 'with err');
    logger.error(new Error(entry.text));
    const child = logger.child({ binding: entry.text });
    child.info('child');
    child.setBindings({ later: entry.text });
    child.info('child after setBindings');
    logger.setBindings({ rootLater: entry.text });
    logger.info('root after setBindings');
    const log = lines();
    expect(log.split('\n').filter(Boolean)).toHaveLength(10);
    expect(leaks(entry, log)).toEqual([]);
  });
});

// A random token in lower case has lost part of its structure; the formats whose lower-case form
// is still the same secret (ids, IBANs, addresses, passwords) must be found in it too.
describe.each(CORPUS.filter((e) => e.lower).map((e) => [e.id, e] as const))('%s in lower case', (_id, entry) => {
  it('is gone', () => {
    const text = `note: ${entry.text.toLowerCase()} (lower)`;
    expect(leaks(entry, redactString(text, policy))).toEqual([]);
  });
});

describe('ordinary data', () => {
  it.each(ORDINARY.map((t) => [t] as const))('%s stays readable', (text) => {
    for (const [, embed] of EMBEDDINGS) {
      const embedded = embed(text);
      expect(redactString(embedded, policy)).toBe(embedded);
    }
    const value = { detail: text, list: [text] };
    const { value: out, receipt } = redact(value, policy);
    expect(out).toBe(value);
    expect(receipt.rules).toEqual([]);
  });
});

describe('field names', () => {
  it.each([
    'pаssword', // Cyrillic а
    'ｐａｓｓｗｏｒｄ',
    'PASSWORD',
    'password_field',
    'userPassword',
    'dbPasswd',
    'credentialsUsed',
    'x-api-key',
    'X-API-KEY',
    'stripeApiKey',
    'ＡＰＩ＿ＫＥＹ',
    'sessionToken2',
    'hmacSigningKey',
    'clientSecretValue',
    'oauth_refresh_token',
    'aws.secret.access.key',
    'Set-Cookie',
    'contraseña',
    'passwort',
    'pαssword', // Greek α
  ])('%s is a secret field', (name) => {
    const { value, receipt } = redact({ [name]: 'v4lue-that-is-secret', keep: 1 }, policy);
    expect(value).toEqual({ keep: 1 });
    expect(receipt.rules).toEqual(['field.secret']);
  });

  it.each([
    'maxTokens',
    'tokenCount',
    'token_type',
    'passwordLength',
    'passwordPolicy',
    'apiKeyId',
    'key',
    'cacheKey',
    'idempotencyKey',
    'author',
    'passenger',
    'secretary',
    'bypass',
    'description',
  ])('%s is not a secret field', (name) => {
    const value = { [name]: 'plain value' };
    expect(redact(value, policy).value).toEqual(value);
  });

  it('folds names: compatibility forms, accents, look-alikes, case and separators', () => {
    expect(normalizeName('ｐａｓｓｗｏｒｄ')).toBe('password');
    expect(normalizeName('p\u0430ssword')).toBe('password');
    expect(normalizeName('Contraseña')).toBe('contrasena');
    expect(normalizeName('X-Api_Key')).toBe('xapikey');
  });

  it('judges names by their words only with the defaults', () => {
    const bare = policyWith({ includeDefaults: false });
    expect(redact({ userPassword: 'x' }, bare).value).toEqual({ userPassword: 'x' });
  });

  it.each(['system', 'instructions', 'history', 'messages', 'prompt', 'transcript', 'attachments', 'systemPrompt'])(
    '%s is content and is summarised',
    (name) => {
      const { value, receipt } = redact({ [name]: 'You are a helpful agent; the user is Jane Doe.' }, policy);
      const summary = (value as Record<string, { bytes: number; hash: string; type: string }>)[name]!;
      expect(Object.keys(summary).sort()).toEqual(['bytes', 'hash', 'type']);
      expect(summary.hash).toMatch(/^hmac:k1:/);
      expect(receipt.rules).toEqual(['field.content']);
    },
  );
});

describe('binary containers', () => {
  const bytes = Buffer.from('%PDF-1.7 secret contract for Jane Doe');
  const containers: [string, unknown][] = [
    ['Buffer', bytes],
    ['Uint8Array', new Uint8Array(bytes)],
    ['ArrayBuffer', bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength)],
    ['DataView', new DataView(new Uint8Array(bytes).buffer)],
    ['Uint16Array', new Uint16Array(new Uint8Array(bytes.subarray(0, 36)).buffer)],
    ['Float64Array', new Float64Array([1.5, 2.5, 3.5])],
    ['Int32Array', new Int32Array([7, 8, 9])],
    ['SharedArrayBuffer', new SharedArrayBuffer(16)],
    ['Blob', new Blob([bytes], { type: 'application/pdf' })],
  ];

  it.each(containers)('%s becomes a content summary, never bytes', (_name, container) => {
    const { value, receipt } = redact({ file: container }, policy);
    const out = (value as { file: Record<string, unknown> }).file;
    expect(Object.keys(out).sort()).toEqual(['bytes', 'hash', 'type']);
    expect(out.hash).toMatch(/^hmac:k1:/);
    expect(typeof out.bytes).toBe('number');
    expect(JSON.stringify(value)).not.toContain('Jane');
    expect(receipt.rules).toEqual(['value.binary']);
    // Idempotent: the summary is recognised.
    expect(redact(value, policy).value).toEqual(value);
  });

  it('keeps the MIME type of a Blob and the byte length of a view', () => {
    const blob = redact({ f: new Blob([bytes], { type: 'application/pdf' }) }, policy).value as {
      f: { type: string; bytes: number };
    };
    expect(blob.f).toMatchObject({ type: 'application/pdf', bytes: bytes.byteLength });
    const view = redact({ f: new Float64Array(4) }, policy).value as { f: { bytes: number; type: string } };
    expect(view.f).toMatchObject({ bytes: 32, type: 'binary' });
  });
});

describe("a policy's own scanners", () => {
  const custom = policyWith({
    scanners: [
      { id: 'acme_ticket', pattern: /ACME-[0-9]{8}/ },
      { id: 'vault_path', scan: (text) => text.replace(/kv\/[a-z]+\/[a-z]+/g, '[redacted:vault_path]') },
      {
        id: 'broken',
        scan: (text) => {
          if (text.includes('explode')) throw new Error('scanner bug');
          return text;
        },
      },
    ],
  });

  it('replace their matches with their marker and name them in the receipt', () => {
    expect(redactString('see ACME-12345678 and kv/prod/stripe', custom)).toBe(
      'see [redacted:acme_ticket] and [redacted:vault_path]',
    );
    const { receipt } = redact({ note: 'ACME-12345678' }, custom);
    expect(receipt.rules).toEqual(['scan.acme_ticket']);
    expect(custom.scanners.slice(0, 3)).toEqual(['acme_ticket', 'vault_path', 'broken']);
    expect(redactString('see ACME-12345678', policy)).toBe('see ACME-12345678');
  });

  it('fail closed when a scanner throws', () => {
    expect(redactString('this will explode now', custom)).toBe('[redacted:broken]');
  });

  it('are validated: id shape, built-in ids, duplicates, kind', () => {
    const bad = (scanners: unknown): IdempotencyConfigError => {
      try {
        policyWith({ scanners } as Partial<RedactionPolicyInput>);
      } catch (err) {
        expect(err).toBeInstanceOf(IdempotencyConfigError);
        return err as IdempotencyConfigError;
      }
      throw new Error('expected the policy to be refused');
    };
    expect(bad([{ id: 'Bad Id', pattern: /x/ }]).message).toContain('scanner id');
    expect(bad([{ id: 'jwt', pattern: /x/ }]).message).toContain('built-in');
    expect(
      bad([
        { id: 'dup', pattern: /x/ },
        { id: 'dup', pattern: /y/ },
      ]).message,
    ).toContain('twice');
    expect(bad([{ id: 'nope', pattern: 'x' }]).message).toContain('scanners');
  });
});

describe('scanner details', () => {
  it('keeps JSON well-formed around a scrubbed header value', () => {
    const text = JSON.stringify({
      msg: 'Authorization: Digest username="bob", response="6629fae49393a05397450978507c4ef1"',
    });
    const out = redactString(text, policy);
    expect(JSON.parse(out)).toEqual({ msg: 'Authorization: [redacted:auth_header]' });
  });

  it('keeps the rest of a line after a key=value password, and the user of a URL', () => {
    expect(redactString('password=hunter2x rejected by sts', policy)).toBe(
      'password=[redacted:secret_pair] rejected by sts',
    );
    expect(redactString('dial redis://:s3cr3t@cache:6379', policy)).toBe(
      'dial redis://:[redacted:url_credentials]@cache:6379',
    );
  });

  it('leaves an @ in a URL path or query alone', () => {
    for (const text of [
      'https://registry.example.com/@babel/core',
      'https://example.com:8443/users?email=a@example.com',
      'https://example.com/profile/@jane',
    ]) {
      expect(redactString(text, policy)).not.toContain('url_credentials');
    }
  });

  it('rejects national ids whose check digit is wrong', () => {
    // A valid DNI letter for 12345678 is Z; any other letter is not a DNI.
    expect(redactString('ref 12345678Z', policy)).toBe('ref [redacted:national_id]');
    expect(redactString('ref 12345678A', policy)).toBe('ref 12345678A');
    // 4111-1111-1111-1112 fails Luhn.
    expect(redactString('card 4111-1111-1111-1112', policy)).toBe('card 4111-1111-1111-1112');
  });
});
