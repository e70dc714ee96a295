import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { SerializationError } from '../../src/errors/errors.js';
import { ERROR_CODES } from '../../src/errors/idempotency-error.js';
import { canonicalJson } from '../../src/fingerprint/canonical-json.js';
import { fingerprint } from '../../src/fingerprint/fingerprint.js';
import { sha256 } from '../../src/fingerprint/sha256.js';

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

/** JSON values with any Unicode in keys and strings (not only ASCII, fast-check's default). */
const jsonArb: fc.Arbitrary<Json> = fc.oneof(
  fc.jsonValue({ maxDepth: 4 }),
  fc.jsonValue({ maxDepth: 4, stringUnit: 'binary' }),
  fc.jsonValue({ maxDepth: 3, stringUnit: 'grapheme' }),
) as fc.Arbitrary<Json>;

/** An effect object with at least one field. */
const effectArb: fc.Arbitrary<{ [k: string]: Json }> = fc.dictionary(
  fc.oneof(fc.string(), fc.string({ unit: 'binary' })),
  jsonArb,
  { minKeys: 1, maxKeys: 8 },
);

function serializationError(value: unknown): SerializationError {
  try {
    canonicalJson(value);
  } catch (err) {
    expect(err).toBeInstanceOf(SerializationError);
    const e = err as SerializationError;
    expect(e.code).toBe('IDEMPOTENCY_NOT_SERIALIZABLE');
    expect(e.code).toBe(ERROR_CODES.serialization);
    expect(e.message).toContain(e.details.path);
    return e;
  }
  throw new Error('expected the value to be refused');
}

/** Double from its IEEE 754 bit pattern, as RFC 8785 Appendix B lists them. */
function fromHex(hex: string): number {
  const view = new DataView(new ArrayBuffer(8));
  view.setBigUint64(0, BigInt(`0x${hex}`));
  return view.getFloat64(0);
}

/** Deterministic PRNG so that a shrunk counterexample replays the same shuffle. */
function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Rebuilds every object with its own keys inserted in a shuffled order (arrays keep their order). */
function shuffleKeys(value: Json, random: () => number): Json {
  if (Array.isArray(value)) return value.map((v) => shuffleKeys(v, random));
  if (value === null || typeof value !== 'object') return value;
  const entries = Object.entries(value);
  for (let i = entries.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [entries[i], entries[j]] = [entries[j]!, entries[i]!];
  }
  // fromEntries defines own properties, so a "__proto__" key stays a key.
  return Object.fromEntries(entries.map(([k, v]) => [k, shuffleKeys(v, random)]));
}

type Path = (string | number)[];

/** Paths of the leaves: scalars and empty containers. */
function leaves(value: Json, path: Path = []): Path[] {
  if (Array.isArray(value)) {
    return value.length === 0 ? [path] : value.flatMap((v, i) => leaves(v, [...path, i]));
  }
  if (value !== null && typeof value === 'object') {
    const keys = Object.keys(value);
    return keys.length === 0 ? [path] : keys.flatMap((k) => leaves(value[k]!, [...path, k]));
  }
  return [path];
}

function getAt(value: Json, path: Path): Json {
  let v: Json = value;
  for (const p of path) v = (v as Record<string | number, Json>)[p]!;
  return v;
}

function setAt(value: Json, path: Path, leaf: Json): Json {
  if (path.length === 0) return leaf;
  const [head, ...rest] = path;
  if (Array.isArray(value)) return value.map((v, i) => (i === head ? setAt(v, rest, leaf) : v));
  const obj = value as { [k: string]: Json };
  return Object.fromEntries(Object.entries(obj).map(([k, v]) => [k, k === head ? setAt(v, rest, leaf) : v]));
}

/** What JSON.parse gives back: the only loss is -0, which JSON has no way to write. */
function normalise(value: Json): Json {
  if (Array.isArray(value)) return value.map(normalise);
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, normalise(v)]));
  }
  return Object.is(value, -0) ? 0 : value;
}

describe('canonicalJson: RFC 8785 examples', () => {
  // §3.2.2, input as printed in the RFC (parsed by JSON.parse so the numbers are read as JSON reads them).
  const rfcInputText = String.raw`{
    "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
    "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
    "literals": [null, true, false]
  }`;
  // The RFC's output, character for character: {"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}
  const rfcOutput =
    '{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"\u20ac$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}';

  it('the expected output literal is the RFC text (raw-string cross-check)', () => {
    expect(rfcOutput).toBe(
      String.raw`{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`,
    );
  });

  it('§3.2.2 sample object serialises exactly as published', () => {
    expect(canonicalJson(JSON.parse(rfcInputText))).toBe(rfcOutput);
  });

  it('§3.2.2 sample object written as a JavaScript literal serialises the same', () => {
    const input = {
      // biome-ignore lint/correctness/noPrecisionLoss: the RFC's input digits; rounding them is what is tested
      numbers: [333333333.33333329, 1e30, 4.5, 2e-3, 0.000000000000000000000000001],
      string: '\u20ac$\u000F\u000aA\'\u0042\u0022\u005c\\"/',
      literals: [null, true, false],
    };
    expect(canonicalJson(input)).toBe(rfcOutput);
    expect(JSON.parse(rfcOutput)).toEqual(input);
  });

  it('§3.2.3 sorts property names by UTF-16 code units', () => {
    const input = {
      '\u20ac': 'Euro Sign',
      '\r': 'Carriage Return',
      '\ufb33': 'Hebrew Letter Dalet With Dagesh',
      '1': 'One',
      '\ud83d\ude00': 'Emoji: Grinning Face',
      '\u0080': 'Control',
      '\u00f6': 'Latin Small Letter O With Diaeresis',
    };
    const out = canonicalJson(input);
    expect(out).toBe(
      '{"\\r":"Carriage Return","1":"One","\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis",' +
        '"\u20ac":"Euro Sign","\ud83d\ude00":"Emoji: Grinning Face","\ufb33":"Hebrew Letter Dalet With Dagesh"}',
    );
    expect(Object.keys(JSON.parse(out))).toEqual(['1', '\r', '\u0080', '\u00f6', '\u20ac', '\ud83d\ude00', '\ufb33']);
    // The emoji (a surrogate pair, 0xD83D...) sorts before U+FB33 although its code point is higher.
    expect(out.indexOf('\ud83d\ude00')).toBeLessThan(out.indexOf('\ufb33'));
  });

  it('sorts numeric-looking keys as strings, not as array indices', () => {
    expect(canonicalJson({ 10: 'a', 9: 'b', 1: 'c', b: 1, a: 2, A: 3 })).toBe(
      '{"1":"c","10":"a","9":"b","A":3,"a":2,"b":1}',
    );
  });

  it.each([
    [0, '0'],
    [-0, '0'],
    [5e-324, '5e-324'],
    [-5e-324, '-5e-324'],
    [1.7976931348623157e308, '1.7976931348623157e+308'],
    [-1.7976931348623157e308, '-1.7976931348623157e+308'],
    [9007199254740992, '9007199254740992'],
    [-9007199254740992, '-9007199254740992'],
    [1e21, '1e+21'],
    [1e20, '100000000000000000000'],
    [0.000001, '0.000001'],
    [1e-7, '1e-7'],
    [4.5, '4.5'],
    [2e-3, '0.002'],
  ])('Appendix B-style number %s serialises as %s', (n, expected) => {
    expect(canonicalJson(n)).toBe(expected);
    expect(canonicalJson([n])).toBe(`[${expected}]`);
  });

  // RFC 8785 Appendix B, IEEE 754 bit patterns and their published serialisations.
  it.each([
    ['0000000000000000', '0'],
    ['8000000000000000', '0'],
    ['0000000000000001', '5e-324'],
    ['8000000000000001', '-5e-324'],
    ['7fefffffffffffff', '1.7976931348623157e+308'],
    ['ffefffffffffffff', '-1.7976931348623157e+308'],
    ['4340000000000000', '9007199254740992'],
    ['c340000000000000', '-9007199254740992'],
    ['4430000000000000', '295147905179352830000'],
    ['44b52d02c7e14af5', '9.999999999999997e+22'],
    ['44b52d02c7e14af6', '1e+23'],
    ['44b52d02c7e14af7', '1.0000000000000001e+23'],
    ['444b1ae4d6e2ef4e', '999999999999999700000'],
    ['444b1ae4d6e2ef4f', '999999999999999900000'],
    ['444b1ae4d6e2ef50', '1e+21'],
    ['3eb0c6f7a0b5ed8c', '9.999999999999997e-7'],
    ['3eb0c6f7a0b5ed8d', '0.000001'],
    ['41b3de4355555553', '333333333.3333332'],
    ['41b3de4355555554', '333333333.33333325'],
    ['41b3de4355555555', '333333333.3333333'],
    ['41b3de4355555556', '333333333.3333334'],
    ['41b3de4355555557', '333333333.33333343'],
    ['becbf647612f3696', '-0.0000033333333333333333'],
    ['43143ff3c1cb0959', '1424953923781206.2'],
  ])('Appendix B: %s serialises as %s', (hex, expected) => {
    expect(canonicalJson(fromHex(hex))).toBe(expected);
  });

  it('Appendix B: NaN and Infinity bit patterns are refused', () => {
    expect(serializationError(fromHex('7fffffffffffffff')).details.path).toBe('$');
    expect(serializationError(fromHex('7ff0000000000000')).details.path).toBe('$');
  });

  it('escapes only what JSON requires, with lowercase hex', () => {
    expect(canonicalJson('\u0000\u001f\u007f\u2028"\\/\b\f\n\r\t')).toBe(
      '"\\u0000\\u001f\u007f\u2028\\"\\\\/\\b\\f\\n\\r\\t"',
    );
  });

  it('serialises objects with toJSON (Date) through it, and leaves out undefined properties', () => {
    expect(canonicalJson({ at: new Date(0) })).toBe('{"at":"1970-01-01T00:00:00.000Z"}');
    expect(canonicalJson({ a: 1, b: undefined, c: { d: undefined } })).toBe('{"a":1,"c":{}}');
    expect(canonicalJson(Object.assign(Object.create(null), { b: 1, a: 2 }))).toBe('{"a":2,"b":1}');
  });

  it('accepts a shared (non-cyclic) reference', () => {
    const shared = { x: 1 };
    expect(canonicalJson({ a: shared, b: [shared, shared] })).toBe('{"a":{"x":1},"b":[{"x":1},{"x":1}]}');
  });
});

describe('canonicalJson: non-JSON values are SerializationError naming the path', () => {
  class Money {
    amount = 1;
  }
  const cyclic: { a: unknown[] } = { a: [1] };
  cyclic.a.push(cyclic);
  const sparse: number[] = [];
  sparse[0] = 1;
  sparse[2] = 3;
  const selfObject: Record<string, unknown> = { ok: 1 };
  selfObject.self = selfObject;

  it.each<[string, unknown, string, RegExp]>([
    ['undefined at top level', undefined, '$', /undefined/],
    ['undefined in an array', [1, undefined], '$[1]', /undefined/],
    ['a hole in a sparse array', sparse, '$[1]', /undefined/],
    ['undefined deep in an array', { a: { b: [0, [undefined]] } }, '$.a.b[1][0]', /undefined/],
    ['a function', { f: () => 1 }, '$.f', /function/],
    ['a symbol', { list: [Symbol('s')] }, '$.list[0]', /symbol/],
    ['a BigInt', { amount: 10n }, '$.amount', /BigInt/],
    ['NaN', { n: Number.NaN }, '$.n', /NaN/],
    ['Infinity', { n: [Number.POSITIVE_INFINITY] }, '$.n[0]', /Infinity/],
    ['-Infinity', { n: Number.NEGATIVE_INFINITY }, '$.n', /-Infinity/],
    ['a cycle through an array', cyclic, '$.a[1]', /cyclic/],
    ['a cycle through an object', selfObject, '$.self', /cyclic/],
    ['a Map', { m: new Map([['a', 1]]) }, '$.m', /Map/],
    ['a Set', { s: new Set([1]) }, '$.s', /Set/],
    ['a class instance', { money: new Money() }, '$.money', /Money/],
    ['a lone high surrogate in a string', { s: 'a\ud800' }, '$.s', /surrogate/],
    ['a lone low surrogate in a string', ['\udc00b'], '$[0]', /surrogate/],
    ['a lone surrogate in a property name', { 'k\ud800': 1 }, '$.k\ud800', /surrogate/],
  ])('%s', (_what, value, path, reason) => {
    const e = serializationError(value);
    expect(e.details.path).toBe(path);
    expect(e.details.reason).toMatch(reason);
  });

  // A toJSON that returns its own object (or an object holding it) must not overflow the stack.
  it('a toJSON that returns its own object is a cycle, not a stack overflow', () => {
    const loop = {
      toJSON(): unknown {
        return { again: loop };
      },
    };
    const e = serializationError({ loop });
    expect(e.details.reason).toMatch(/cyclic/);
  });

  it('fingerprint refuses a non-JSON effect the same way', () => {
    expect(() => fingerprint('op', { amount: 1n })).toThrow(SerializationError);
  });
});

describe('canonicalJson: properties', () => {
  it('parses back to a value deep-equal to the input (-0 becomes 0)', () => {
    fc.assert(
      fc.property(jsonArb, (value) => {
        const text = canonicalJson(value);
        expect(JSON.parse(text)).toEqual(normalise(value));
        // Canonical form is a fixed point.
        expect(canonicalJson(JSON.parse(text))).toBe(text);
      }),
      { numRuns: 500 },
    );
  });

  it('agrees with JSON.stringify on values without objects', () => {
    const noObjects = fc.letrec((tie) => ({
      value: fc.oneof(
        { depthSize: 'small' },
        fc.constant(null),
        fc.boolean(),
        fc.double({ noNaN: true, noDefaultInfinity: true }),
        fc.string({ unit: 'binary' }),
        fc.array(tie('value'), { maxLength: 5 }),
      ),
    })).value;
    fc.assert(
      fc.property(noObjects, (value) => {
        expect(canonicalJson(value)).toBe(JSON.stringify(value));
      }),
    );
  });

  it('writes object members sorted by UTF-16 code units, each value canonical', () => {
    const byCodeUnits = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
    fc.assert(
      fc.property(effectArb, (obj) => {
        const members = Object.keys(obj)
          .sort(byCodeUnits)
          .map((k) => `${JSON.stringify(k)}:${canonicalJson(obj[k])}`);
        expect(canonicalJson(obj)).toBe(`{${members.join(',')}}`);
      }),
      { numRuns: 300 },
    );
  });
});

describe('fingerprint: properties', () => {
  it('is a SHA-256 hex digest, pinned for a known input', () => {
    expect(fingerprint('payments.charge', { amount: 500, currency: 'EUR', customer: 'c_1' })).toBe(
      '0055e6a4cdb26ef55cd5db33915131e92aae4b9898bd517f776602e43318f14f',
    );
    expect(fingerprint('payments.charge', { customer: 'c_1', currency: 'EUR', amount: 500 })).toBe(
      '0055e6a4cdb26ef55cd5db33915131e92aae4b9898bd517f776602e43318f14f',
    );
  });

  it('ignores key order (objects shuffled recursively)', () => {
    fc.assert(
      fc.property(fc.string(), effectArb, fc.integer(), (operation, effect, seed) => {
        const shuffled = shuffleKeys(effect, mulberry32(seed));
        expect(shuffled).toEqual(effect);
        expect(fingerprint(operation, shuffled)).toBe(fingerprint(operation, effect));
      }),
      { numRuns: 300 },
    );
  });

  it('ignores key order for an object with many keys inserted in reverse', () => {
    const keys = Array.from({ length: 50 }, (_, i) => `k${String.fromCharCode(0x41 + (i % 60))}${i}`);
    const forward = Object.fromEntries(keys.map((k, i) => [k, { n: i, tag: k }]));
    const backward = Object.fromEntries(
      [...keys].reverse().map((k) => [k, { tag: k, n: keys.indexOf(k) }] as [string, Json]),
    );
    expect(JSON.stringify(forward)).not.toBe(JSON.stringify(backward));
    expect(fingerprint('op', backward)).toBe(fingerprint('op', forward));
  });

  it('changes when any one leaf value changes', () => {
    fc.assert(
      fc.property(effectArb, fc.nat(), jsonArb, (effect, pick, replacement) => {
        const paths = leaves(effect);
        const path = paths[pick % paths.length]!;
        const before = getAt(effect, path);
        fc.pre(canonicalJson(before) !== canonicalJson(replacement));
        const changed = setAt(effect, path, replacement);
        expect(fingerprint('op', changed)).not.toBe(fingerprint('op', effect));
      }),
      { numRuns: 500 },
    );
  });

  it('changes on small leaf edits: number, string, boolean, null, type', () => {
    const base = { amount: 500, currency: 'EUR', capture: true, note: null, items: [{ sku: 'a', qty: 1 }] };
    const f = fingerprint('payments.charge', base);
    const edits: Json[] = [
      { ...base, amount: 501 },
      { ...base, amount: '500' },
      { ...base, currency: 'eur' },
      { ...base, capture: false },
      { ...base, note: '' },
      { ...base, note: 0 },
      { ...base, items: [{ sku: 'a', qty: 2 }] },
      {
        ...base,
        items: [
          { sku: 'a', qty: 1 },
          { sku: 'a', qty: 1 },
        ],
      },
      { ...base, items: [] },
      { ...base, extra: null },
    ];
    const all = edits.map((e) => fingerprint('payments.charge', e));
    for (const g of all) expect(g).not.toBe(f);
    expect(new Set(all).size).toBe(edits.length);
  });

  it('differs for different operation names with an equal effect', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary' }), fc.string({ unit: 'binary' }), jsonArb, (opA, opB, effect) => {
        fc.pre(opA !== opB);
        expect(fingerprint(opA, effect)).not.toBe(fingerprint(opB, effect));
      }),
      { numRuns: 300 },
    );
    expect(fingerprint('charge', { amount: 1 })).not.toBe(fingerprint('refund', { amount: 1 }));
  });

  it('never puts a raw newline in canonical JSON (the fingerprint separator stays unambiguous)', () => {
    fc.assert(
      fc.property(jsonArb, (value) => {
        expect(canonicalJson(value)).not.toContain('\n');
      }),
    );
  });
});

describe('sha256', () => {
  it('gives the digest of the UTF-8 bytes, as createHash does, in hex and base64url', () => {
    for (const text of ['', 'abc', 'ünïcödé ☃ \u{1F600}', 'x'.repeat(10_000), 'a\u0000b']) {
      expect(sha256(text, 'hex')).toBe(createHash('sha256').update(text, 'utf8').digest('hex'));
      expect(sha256(text, 'base64url')).toBe(createHash('sha256').update(text, 'utf8').digest('base64url'));
    }
    expect(sha256('abc', 'hex')).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad'); // FIPS 180-2
  });
});
