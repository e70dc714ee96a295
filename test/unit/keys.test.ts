import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { InvalidIdempotencyKeyError } from '../../src/errors/errors.js';
import { ERROR_CODES } from '../../src/errors/idempotency-error.js';
import {
  boundedKey,
  canonicalKey,
  type IdempotencyKey,
  idempotencyKeySchema,
  KEY_LIMITS,
  MAX_BOUNDED_KEY_LENGTH,
  parseCanonicalKey,
  parseIdempotencyKey,
} from '../../src/keys/idempotency-key.js';
import { ENVELOPE_FIELD, envelopeSchema, readEnvelope } from '../../src/operation/envelope.js';

// biome-ignore lint/suspicious/noControlCharactersInRegex: stripping exactly the characters the schema refuses
const CONTROL_G = /[\u0000-\u001f\u007f-\u009f]/g;
const PRINTABLE_ASCII = /^[\x21-\x7e]+$/;
const HASHED_FORM = /^[\x21-\x7e]{200}#[A-Za-z0-9_-]{43}$/;

/** Characters chosen to break a naive encoding: separators, escapes, look-alikes, pairs and combining marks. */
const adversarial = fc.constantFrom(
  ':',
  '%',
  '#',
  '%3A',
  '%25',
  '%23',
  '::',
  '/',
  '?',
  '&',
  '=',
  '+',
  ' ',
  '\u00a0',
  '\u2028',
  'é',
  'e\u0301',
  '€',
  '%E2%82%AC',
  '😀',
  '\ufb33',
  '中',
  'a',
  'Z',
  '0',
  '-',
  '.',
  '~',
  "'",
  '*',
);
const unit = fc.oneof(
  { arbitrary: adversarial, weight: 3 },
  { arbitrary: fc.string({ unit: 'binary', minLength: 1, maxLength: 1 }), weight: 2 },
  { arbitrary: fc.string({ unit: 'grapheme', minLength: 1, maxLength: 1 }), weight: 1 },
);

/** Makes a raw string a valid key part: no control characters, within `max`, no cut pair, no outer white space. */
function clean(raw: string, max: number): string {
  let s = raw.replace(CONTROL_G, '');
  if (s.length > max) s = s.slice(0, max);
  if (!s.isWellFormed()) s = s.slice(0, -1);
  return s.trim();
}

/** Short parts, and parts at or near the length limit (so the canonical form overflows and is hashed). */
const part = (max: number) =>
  fc
    .oneof(fc.array(unit, { minLength: 1, maxLength: 12 }), fc.array(unit, { minLength: max - 8, maxLength: max + 4 }))
    .map((units) => clean(units.join(''), max))
    .filter((s) => s.length > 0);

const keyArb: fc.Arbitrary<IdempotencyKey> = fc.record({
  namespace: part(KEY_LIMITS.namespace),
  resourceKey: part(KEY_LIMITS.resourceKey),
  version: part(KEY_LIMITS.version),
});

/** A small alphabet of parts so that generated keys share parts and differ by where a ':' falls. */
const atom = fc.constantFrom('a', 'b', 'c', 'a:b', 'b:c', ':', '%', '%3A', 'a%3Ab', '#', '€', '%E2%82%AC', 'a b');
const smallKeyArb: fc.Arbitrary<IdempotencyKey> = fc.record({ namespace: atom, resourceKey: atom, version: atom });

/** Keys whose canonical forms share their first 200 characters, so bounded keys differ only by the hash. */
const samePrefixKeyArb: fc.Arbitrary<IdempotencyKey> = fc.record({
  namespace: fc.constant('é'.repeat(KEY_LIMITS.namespace)),
  resourceKey: part(KEY_LIMITS.resourceKey),
  version: part(KEY_LIMITS.version),
});

const anyKeyArb = fc.oneof(keyArb, smallKeyArb, samePrefixKeyArb);
const identity = (k: IdempotencyKey) => JSON.stringify([k.namespace, k.resourceKey, k.version]);
const distinctKeys = fc.uniqueArray(anyKeyArb, { selector: identity, minLength: 2, maxLength: 30 });

function invalidKeyError(value: unknown): InvalidIdempotencyKeyError {
  try {
    parseIdempotencyKey(value);
  } catch (err) {
    expect(err).toBeInstanceOf(InvalidIdempotencyKeyError);
    const e = err as InvalidIdempotencyKeyError;
    expect(e.code).toBe('IDEMPOTENCY_INVALID_KEY');
    expect(e.code).toBe(ERROR_CODES.invalidKey);
    return e;
  }
  throw new Error(`expected ${JSON.stringify(value)} to be refused`);
}

const valid: IdempotencyKey = { namespace: 'acme/assets.create', resourceKey: 'task:42', version: 'v1' };

describe('generators', () => {
  it('produce valid keys, both short (plain) and long (hashed) bounded forms', () => {
    const sample = fc.sample(anyKeyArb, { numRuns: 300, seed: 42 });
    for (const k of sample) expect(parseIdempotencyKey(k)).toEqual(k);
    const hashed = sample.filter((k) => boundedKey(k).includes('#')).length;
    expect(hashed).toBeGreaterThan(30);
    expect(sample.length - hashed).toBeGreaterThan(30);
  });
});

describe('canonicalKey', () => {
  it('is injective: distinct keys have distinct canonical strings', () => {
    fc.assert(
      fc.property(distinctKeys, (keys) => {
        expect(new Set(keys.map(canonicalKey)).size).toBe(keys.length);
      }),
      { numRuns: 200 },
    );
  });

  it('is injective for any two keys', () => {
    fc.assert(
      fc.property(anyKeyArb, anyKeyArb, (a, b) => {
        expect(canonicalKey(a) === canonicalKey(b)).toBe(identity(a) === identity(b));
      }),
      { numRuns: 300 },
    );
  });

  it('has exactly two unencoded separators and never contains #', () => {
    fc.assert(
      fc.property(anyKeyArb, (k) => {
        const c = canonicalKey(k);
        expect(c.split(':')).toHaveLength(3);
        expect(c).not.toContain('#');
        expect(c).toMatch(PRINTABLE_ASCII);
      }),
    );
  });

  it("('a:b','c',v) and ('a','b:c',v) differ", () => {
    const left = canonicalKey({ namespace: 'a:b', resourceKey: 'c', version: 'v1' });
    const right = canonicalKey({ namespace: 'a', resourceKey: 'b:c', version: 'v1' });
    expect(left).not.toBe(right);
    expect(left).toBe('a%3Ab:c:v1');
    expect(right).toBe('a:b%3Ac:v1');
  });

  it('keeps a part that looks like an encoding apart from the text it encodes', () => {
    const a = canonicalKey({ namespace: '€', resourceKey: 'r', version: 'v' });
    const b = canonicalKey({ namespace: '%E2%82%AC', resourceKey: 'r', version: 'v' });
    expect(a).not.toBe(b);
    expect(canonicalKey({ namespace: '%3A', resourceKey: 'r', version: 'v' })).not.toBe(
      canonicalKey({ namespace: ':', resourceKey: 'r', version: 'v' }),
    );
  });

  it('is the documented percent-encoded form', () => {
    expect(canonicalKey(valid)).toBe('acme%2Fassets.create:task%3A42:v1');
  });

  it('is each part through encodeURIComponent, whatever keys came before (a part repeated, or one that differs)', () => {
    const encoded = (k: IdempotencyKey) =>
      `${encodeURIComponent(k.namespace)}:${encodeURIComponent(k.resourceKey)}:${encodeURIComponent(k.version)}`;
    const parts = fc.oneof(
      fc.constantFrom(
        'a',
        "A-z_0.9!~*'()",
        'acme/assets.create',
        'v1',
        '',
        ' ',
        '%41',
        'é',
        '😀',
        'a:b#c?d&e',
        'x\ud800',
      ),
      fc.string({ unit: 'binary', maxLength: 12 }),
    );
    const anyKey = fc.record({ namespace: parts, resourceKey: parts, version: parts });
    fc.assert(
      fc.property(fc.array(anyKey, { minLength: 1, maxLength: 8 }), (keys) => {
        for (const k of keys) {
          let expected: string | Error;
          try {
            expected = encoded(k);
          } catch (err) {
            expected = err as Error;
          }
          if (typeof expected === 'string') expect(canonicalKey(k)).toBe(expected);
          else expect(() => canonicalKey(k)).toThrow(URIError);
        }
      }),
      { numRuns: 500 },
    );
  });
});

describe('boundedKey', () => {
  it(`is at most ${MAX_BOUNDED_KEY_LENGTH} printable ASCII characters and stable`, () => {
    fc.assert(
      fc.property(anyKeyArb, (k) => {
        const b = boundedKey(k);
        expect(b.length).toBeLessThanOrEqual(MAX_BOUNDED_KEY_LENGTH);
        expect(b).toMatch(PRINTABLE_ASCII);
        expect(boundedKey({ ...k })).toBe(b);
        const c = canonicalKey(k);
        if (c.length <= MAX_BOUNDED_KEY_LENGTH) expect(b).toBe(c);
        else {
          expect(b).toMatch(HASHED_FORM);
          expect(b.slice(0, 200)).toBe(c.slice(0, 200));
        }
      }),
      { numRuns: 300 },
    );
  });

  it('is injective over generated keys, including long keys that share a 200-character prefix', () => {
    fc.assert(
      fc.property(distinctKeys, (keys) => {
        expect(new Set(keys.map(boundedKey)).size).toBe(keys.length);
      }),
      { numRuns: 200 },
    );
    fc.assert(
      fc.property(fc.uniqueArray(samePrefixKeyArb, { selector: identity, minLength: 2, maxLength: 20 }), (keys) => {
        const bounded = keys.map(boundedKey);
        for (const b of bounded) expect(b).toMatch(HASHED_FORM);
        expect(new Set(bounded.map((b) => b.slice(0, 200))).size).toBe(1);
        expect(new Set(bounded).size).toBe(keys.length);
      }),
      { numRuns: 100 },
    );
  });

  it('switches to the hashed form exactly above 255 characters', () => {
    const at = { namespace: 'n', resourceKey: 'r'.repeat(MAX_BOUNDED_KEY_LENGTH - 4), version: 'v' };
    expect(canonicalKey(at)).toHaveLength(MAX_BOUNDED_KEY_LENGTH);
    expect(boundedKey(at)).toBe(canonicalKey(at));
    const above = { ...at, resourceKey: `${at.resourceKey}r` };
    expect(canonicalKey(above)).toHaveLength(MAX_BOUNDED_KEY_LENGTH + 1);
    const b = boundedKey(above);
    expect(b).toMatch(HASHED_FORM);
    expect(b).toHaveLength(200 + 1 + 43);
    expect(b).not.toBe(boundedKey(at));
  });

  it('stays bounded for the longest keys of 4-byte characters', () => {
    const k = {
      namespace: '😀'.repeat(KEY_LIMITS.namespace / 2),
      resourceKey: '😀'.repeat(KEY_LIMITS.resourceKey / 2),
      version: '😀'.repeat(KEY_LIMITS.version / 2),
    };
    expect(parseIdempotencyKey(k)).toEqual(k);
    const b = boundedKey(k);
    expect(b.length).toBeLessThanOrEqual(MAX_BOUNDED_KEY_LENGTH);
    expect(b).toMatch(HASHED_FORM);
  });

  it('never changes for a given key (pinned values)', () => {
    expect(boundedKey(valid)).toBe('acme%2Fassets.create:task%3A42:v1');
    const long = { namespace: 'acme/assets.create', resourceKey: `task:${'x'.repeat(300)}`, version: 'v1' };
    expect(boundedKey(long)).toBe(
      `acme%2Fassets.create:task%3A${'x'.repeat(200 - 28)}#poDtmAqL3uB0g6dmRc0SbYbY0QeTvEyYEhUHCdapOdk`,
    );
  });
});

describe('parseCanonicalKey', () => {
  it('round-trips canonicalKey', () => {
    fc.assert(
      fc.property(anyKeyArb, (k) => {
        expect(parseCanonicalKey(canonicalKey(k))).toEqual(k);
      }),
      { numRuns: 300 },
    );
  });

  it('refuses a hashed bounded key, a wrong number of parts and bad percent-encoding', () => {
    const long = { namespace: 'n', resourceKey: 'r'.repeat(400), version: 'v' };
    for (const text of [boundedKey(long), 'a:b', 'a:b:c:d', 'a:%E2%82:c', 'a:%ZZ:c', '']) {
      expect(() => parseCanonicalKey(text)).toThrow(InvalidIdempotencyKeyError);
    }
  });

  it('validates the decoded parts', () => {
    expect(() => parseCanonicalKey('a:%20b:c')).toThrow(/resourceKey: must not start or end with white space/);
    expect(() => parseCanonicalKey('a::c')).toThrow(/resourceKey: must not be empty/);
    expect(() => parseCanonicalKey('a:b%00:c')).toThrow(/resourceKey: must not contain control characters/);
  });
});

describe('parseIdempotencyKey validation', () => {
  it('accepts a valid key and parts exactly at the limits', () => {
    expect(parseIdempotencyKey(valid)).toEqual(valid);
    const atLimit = {
      namespace: 'n'.repeat(KEY_LIMITS.namespace),
      resourceKey: 'r'.repeat(KEY_LIMITS.resourceKey),
      version: 'v'.repeat(KEY_LIMITS.version),
    };
    expect(parseIdempotencyKey(atLimit)).toEqual(atLimit);
  });

  const fields = ['namespace', 'resourceKey', 'version'] as const;

  it.each(fields)('refuses an empty %s', (field) => {
    const e = invalidKeyError({ ...valid, [field]: '' });
    expect(e.details.issues).toEqual([{ path: field, message: 'must not be empty' }]);
  });

  it.each(fields)('refuses a %s longer than KEY_LIMITS', (field) => {
    const max = KEY_LIMITS[field];
    const e = invalidKeyError({ ...valid, [field]: 'x'.repeat(max + 1) });
    expect(e.details.issues).toEqual([{ path: field, message: `must be at most ${max} characters` }]);
  });

  // KEY_LIMITS is in UTF-16 code units (zod's `.max()` counts code points, so src checks
  // `length` itself): max-1 characters plus one astral character is max+1 units, refused.
  it.each(fields)('refuses a %s over KEY_LIMITS in UTF-16 code units (astral characters)', (field) => {
    const max = KEY_LIMITS[field];
    const value = `${'x'.repeat(max - 1)}😀`;
    expect(value.length).toBe(max + 1);
    const e = invalidKeyError({ ...valid, [field]: value });
    expect(e.details.issues).toEqual([{ path: field, message: `must be at most ${max} characters` }]);
  });

  it.each(fields)('refuses a non-string or missing %s', (field) => {
    for (const bad of [42, null, ['a'], { a: 1 }, true]) {
      const e = invalidKeyError({ ...valid, [field]: bad });
      expect(e.details.issues.map((i) => i.path)).toEqual([field]);
    }
    const { [field]: _omitted, ...missing } = valid;
    expect(invalidKeyError(missing).details.issues.map((i) => i.path)).toEqual([field]);
  });

  it.each(fields)('refuses control characters in %s', (field) => {
    for (const c of ['\u0000', '\t', '\n', '\r', '\u001b', '\u007f', '\u0085', '\u009f']) {
      const e = invalidKeyError({ ...valid, [field]: `a${c}b` });
      expect(e.details.issues).toEqual([{ path: field, message: 'must not contain control characters' }]);
    }
  });

  it.each(fields)('refuses a lone surrogate in %s', (field) => {
    for (const s of ['a\ud800b', '\udc00', 'x\ud83d']) {
      const e = invalidKeyError({ ...valid, [field]: s });
      expect(e.details.issues).toEqual([{ path: field, message: 'must be well-formed Unicode (no lone surrogates)' }]);
    }
  });

  it.each(fields)('refuses leading or trailing white space in %s', (field) => {
    for (const s of [' a', 'a ', '\u00a0a', 'a\u3000', '\ufeffa', 'a\u2028']) {
      const e = invalidKeyError({ ...valid, [field]: s });
      expect(e.details.issues).toEqual([{ path: field, message: 'must not start or end with white space' }]);
    }
    expect(parseIdempotencyKey({ ...valid, [field]: 'a b' })[field]).toBe('a b');
  });

  it('refuses an unknown extra field and names it', () => {
    const e = invalidKeyError({ ...valid, attempt: 3 });
    expect(e.details.issues).toHaveLength(1);
    expect(e.details.issues[0]?.message).toContain('attempt');
    expect(e.message).toContain('attempt');
  });

  it('refuses values that are not objects', () => {
    for (const bad of [null, undefined, 'acme:task:v1', 42, []]) {
      expect(invalidKeyError(bad).details.issues.length).toBeGreaterThan(0);
    }
  });

  it('reports every issue at once, each naming its field', () => {
    const e = invalidKeyError({ namespace: '', resourceKey: ' x', version: 'v\u0000' });
    expect(e.details.issues.map((i) => i.path).sort()).toEqual(['namespace', 'resourceKey', 'version']);
    expect(e.message).toContain('namespace: must not be empty');
    expect(e.message).toContain('resourceKey: must not start or end with white space');
    expect(e.message).toContain('version: must not contain control characters');
  });
});

describe('the hand check of parseIdempotencyKey and of a job envelope', () => {
  /** Values near the schema's edges: generated keys, broken parts, extra or missing fields, non-objects. */
  const rawPart = fc.oneof(
    part(KEY_LIMITS.version),
    fc.array(unit, { minLength: 0, maxLength: 70 }).map((u) => u.join('')),
    fc.constantFrom('', ' a', 'a\u0000', '\ud800', 'x'.repeat(KEY_LIMITS.version + 1)),
    fc.anything(),
  );
  const nearKey = fc.oneof(
    anyKeyArb,
    fc.record({ namespace: rawPart, resourceKey: rawPart, version: rawPart }, { requiredKeys: [] }),
    fc.tuple(anyKeyArb, fc.string(), fc.anything()).map(([k, name, v]) => ({ ...k, [name]: v })),
    fc.anything(),
  );

  it('accepts exactly what the schema accepts, with the same parts', () => {
    fc.assert(
      fc.property(nearKey, (value) => {
        const schema = idempotencyKeySchema.safeParse(value);
        let parsed: IdempotencyKey | undefined;
        try {
          parsed = parseIdempotencyKey(value);
        } catch (err) {
          expect(err).toBeInstanceOf(InvalidIdempotencyKeyError);
        }
        expect(parsed).toEqual(schema.success ? schema.data : undefined);
      }),
      { numRuns: 3000 },
    );
  });

  it('reads an envelope only when the schema accepts it, as the schema reads it', () => {
    const meta = fc.record(
      {
        v: fc.constantFrom<unknown>(1, 2, '1'),
        operation: fc.oneof(fc.string({ maxLength: 3 }), fc.constant('o'.repeat(201)), fc.anything()),
        key: nearKey,
        taskId: fc.oneof(fc.string({ maxLength: 3 }), fc.constant('t'.repeat(200)), fc.anything()),
        extra: fc.anything(),
      },
      { requiredKeys: ['v', 'operation', 'key'] },
    );
    const data = fc.oneof(
      fc.record({ [ENVELOPE_FIELD]: meta, input: fc.anything() }),
      fc.record({ [ENVELOPE_FIELD]: meta, input: fc.anything(), other: fc.anything() }, { requiredKeys: [] }),
      fc.anything(),
    );
    fc.assert(
      fc.property(data, (value) => {
        const read = readEnvelope(value);
        if (read === undefined) return;
        const schema = envelopeSchema.safeParse(value);
        expect(schema.success).toBe(true);
        expect(read).toEqual(schema.data);
      }),
      { numRuns: 3000 },
    );
    // And the hand check does read the envelopes the producer writes.
    const made = { [ENVELOPE_FIELD]: { v: 1, operation: 'acme/x', key: valid, taskId: 't1' }, input: { a: 1 } };
    expect(readEnvelope(made)).toEqual(made);
    expect(
      readEnvelope(JSON.parse(JSON.stringify({ ...made, [ENVELOPE_FIELD]: { v: 1, operation: 'o', key: valid } }))),
    ).toBeDefined();
  });
});
