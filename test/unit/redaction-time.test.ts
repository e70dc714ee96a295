import { beforeAll, describe, expect, it } from 'vitest';
import {
  defineRedactionPolicy,
  type RedactionPolicy,
  type RedactionPolicyInput,
  redact,
  redactString,
} from '../../src/redaction/index.js';
import { medianCpuMs } from '../helpers/cpu-time.js';

/**
 * Growth, not speed: each case measures the CPU time for an input of size n and of size 4n
 * (medians of several runs) and requires the ratio to stay far below the 16 a quadratic cost
 * would give. CPU time, so that other processes on the machine do not count.
 */

const KEY = 'time-test-hmac-key-0123456789abcdef0123456789';

function policyWith(extra: Partial<RedactionPolicyInput> = {}): RedactionPolicy {
  return defineRedactionPolicy({ version: 'time-1', hmacKeys: [{ id: 'k1', secret: KEY }], ...extra });
}

const wide = policyWith({
  limits: { maxStringLength: 16 * 1024 * 1024, maxDepth: 1000, scanBudget: 1 << 30, maxReceiptPaths: 200 },
});

const RUNS = 5;
const FACTOR = 4;
/** Linear growth gives 4; quadratic 16. The slack covers GC pauses and a noisy neighbour. */
const MAX_RATIO = 8;

let salt = 0;

/**
 * Time for size 4n over time for size n, after a warm-up of both (JIT and regexp tier-up). The
 * best of up to five attempts (stopping at the first under the bound): noise (GC, a busy
 * neighbour) only ever slows one side down, while a quadratic cost shows in every attempt.
 */
function ratioFor(build: (n: number, salt: number) => unknown, run: (input: unknown) => unknown, n: number): number {
  run(build(n, salt++));
  run(build(n * FACTOR, salt++));
  let best = Number.POSITIVE_INFINITY;
  for (let attempt = 0; attempt < 5 && best >= MAX_RATIO; attempt++) {
    // A floor of a tenth of a millisecond, so that timer resolution cannot make a ratio.
    const small = Math.max(
      medianCpuMs(() => build(n, salt++), run, RUNS),
      0.1,
    );
    const large = Math.max(
      medianCpuMs(() => build(n * FACTOR, salt++), run, RUNS),
      0.1,
    );
    best = Math.min(best, large / small);
  }
  return best;
}

const hostileUnit = 'aA1-_.:=@ ';
const fill = (unit: string, n: number) => unit.repeat(Math.ceil(n / unit.length)).slice(0, n);

/** Nested objects `{ k: { k: … { leaf } } }`, `depth` levels. */
function nested(depth: number, leaf: unknown): unknown {
  let node: unknown = leaf;
  for (let d = 0; d < depth; d++) node = { [`level_${d % 7}`]: node, note: 'x' };
  return node;
}

const cases: [string, (n: number, salt: number) => unknown, (input: unknown) => unknown, number][] = [
  ['one long key', (n) => ({ [fill('password=', n)]: 1 }), (v) => redact(v, wide), 64 * 1024],
  [
    'many distinct keys',
    (n, salt) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`${fill('ab@c.', 150)}${salt}:${i}`, i])),
    (v) => redact(v, wide),
    2_000,
  ],
  ['deep nesting', (n) => nested(n, 'jane@example.com'), (v) => redact(v, wide), 200],
  [
    'long hostile string (redactString)',
    (n) => fill(hostileUnit, n),
    (v) => redactString(v as string, wide),
    64 * 1024,
  ],
  ['long hostile string (redact)', (n) => ({ v: fill(hostileUnit, n) }), (v) => redact(v, wide), 64 * 1024],
  [
    'many hits under long keys, deep down',
    (n) =>
      nested(
        30,
        Array.from({ length: n }, (_, i) => `mail u${i}@example.com`),
      ),
    (v) => redact(v, wide),
    2_000,
  ],
  [
    'many hits deep down with long key names',
    (n) => {
      let node: unknown = Array.from({ length: n }, (_, i) => `card 4539 8073 9823 7388 ref ${i}`);
      for (let d = 0; d < 30; d++) node = { [`${fill('k', 250)}${d}`]: node };
      return node;
    },
    (v) => redact(v, wide),
    2_000,
  ],
  [
    'a long key over many fields judged by their parent (name)',
    (n) => ({ [fill('ab ', n)]: Array.from({ length: n / 256 }, () => ({ name: 'Jane Doe' })) }),
    (v) => redact(v, wide),
    16 * 1024,
  ],
  [
    'many hits under one long key',
    (n) => ({ [fill('k', n)]: Array.from({ length: n / 256 }, (_, i) => `mail u${i}@example.com`) }),
    (v) => redact(v, wide),
    16 * 1024,
  ],
  ['many secret pairs', (n) => ({ v: fill('"secret":"x", ', n) }), (v) => redact(v, wide), 32 * 1024],
  [
    'headers and cookies',
    (n) => fill('Cookie: a=b; c=d\nAuthorization: Digest x="1"\n', n),
    (v) => redactString(v as string, wide),
    32 * 1024,
  ],
  ['digit groups', (n) => fill('4111 2222 3333 ', n), (v) => redactString(v as string, wide), 32 * 1024],
  ['url-like', (n) => fill('a:b@c:d@', n), (v) => redactString(v as string, wide), 32 * 1024],
  ['escaped quotes', (n) => fill('\\\\\\"password\\\\\\":', n), (v) => redactString(v as string, wide), 32 * 1024],
  ['token runs', (n) => fill('aB3dE5fG7hJ9kL1mN2pQ-', n), (v) => redactString(v as string, wide), 32 * 1024],
  ['non-ASCII', (n) => fill('用户@例子.公司 ４１１１　', n), (v) => redactString(v as string, wide), 32 * 1024],
];

describe('redaction grows linearly with its input', () => {
  it.each(cases)('%s', (_name, build, run, n) => {
    const ratio = ratioFor(build, run, n);
    expect(ratio).toBeLessThan(MAX_RATIO);
  });
});

describe('long keys and the scan budget', () => {
  const policy = policyWith();

  it('replaces a key too long to be a name by an opaque reference, without scanning it', () => {
    const key = `${fill('x', 256 * 1024)}jane@example.com`;
    const { value, receipt } = redact({ [key]: 'v', ok: 1 }, policy);
    const keys = Object.keys(value as object);
    expect(keys).toHaveLength(2);
    expect(keys[0]).toMatch(/^ref:k1:[A-Za-z0-9_-]{22}$/);
    expect(receipt.rules).toEqual(['limit.key']);
    // Idempotent: the reference is kept as it is the second time.
    expect(redact(value, policy).value).toEqual(value);
    // Not scanned: the cost grows no faster than copying the key. Both sizes past the CPU's
    // caches (256 K and 1 M characters): from 64 K to 256 K a copy alone grows more than fourfold
    // on a machine whose cache holds the one and not the other.
    const ratio = ratioFor(
      (n, salt) => ({ [`${fill('x', n)}${salt}jane@example.com`]: 'v', ok: 1 }),
      (v) => redact(v, policy),
      256 * 1024,
    );
    expect(ratio).toBeLessThan(MAX_RATIO);
  });

  it('summarises what is past the budget instead of scanning it (fail closed)', () => {
    const small = policyWith({ limits: { scanBudget: 4096 } });
    const strings = Array.from({ length: 10 }, (_, i) => `${'word '.repeat(100)}jane${i}@example.com`);
    const { value, receipt } = redact({ notes: strings }, small);
    const notes = (value as { notes: unknown[] }).notes;
    expect(typeof notes[0]).toBe('string');
    expect(notes[0]).toContain('j***@example.com');
    expect(notes[9]).toMatchObject({ type: 'text', hash: expect.stringMatching(/^hmac:k1:/) });
    expect(receipt.rules).toContain('limit.budget');
    expect(JSON.stringify(value)).not.toContain('jane9@');
  });
});

describe('a hostile 1 MiB value', () => {
  const policy = policyWith();
  const MiB = 1024 * 1024;

  /** About `scale` MiB of content aimed at every scanner, in keys, strings, depth and breadth. */
  function hostile(scale = 1): Record<string, unknown> {
    const chunk = (unit: string) => fill(unit, 60 * 1024 * scale);
    return {
      [fill('password=', 200 * 1024 * scale)]: 'x',
      strings: [
        chunk(hostileUnit),
        chunk('eyJ-'),
        chunk('-----BEGIN '),
        chunk('4111 '),
        chunk('a@'),
        chunk('"secret":"'),
        chunk('Bearer '),
        chunk('://a:'),
        chunk('+1 '),
        chunk('DE89 '),
        chunk('Cookie: a='),
        chunk('aB3dE5fG7hJ9kL1mN2pQ'),
      ],
      keys: Object.fromEntries(Array.from({ length: 1000 * scale }, (_, i) => [`${fill('token_', 120)}${i}`, `v${i}`])),
      deep: nested(31, fill(hostileUnit, 4096)),
      many: Array.from({ length: 2000 * scale }, (_, i) => `mail jane${i}@example.com card 4539 8073 9823 7388`),
    };
  }

  beforeAll(() => {
    // Warm the code paths on a small value first: the bound is about blocking, not compiling.
    redact({ s: fill(hostileUnit, 4096), k: { [fill('a', 300)]: 1 } }, policy);
  });

  it('costs no more than linear in its size (a quarter of it against all of it)', () => {
    const value = hostile();
    expect(JSON.stringify(value).length).toBeGreaterThan(MiB);
    const { value: out, receipt } = redact(value, policy);
    expect(
      ratioFor(
        (scale) => hostile(scale),
        (v) => redact(v, policy),
        1 / FACTOR,
      ),
    ).toBeLessThan(MAX_RATIO);
    const text = JSON.stringify(out);
    expect(text).not.toContain('jane1999@');
    expect(text).not.toContain('4539 8073 9823');
    expect(receipt.counts['limit.key']).toBe(1);
  });
});
