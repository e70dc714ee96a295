import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { highEntropyScanner } from '../../src/scanners/high-entropy.js';
import { secretPairScanner } from '../../src/scanners/secret-pair.js';
import { textFeatures } from '../../src/scanners/text-features.js';

/** The scanner's answer and its hits for one text. */
function scan(text: string): { out: string; hits: string[] } {
  const hits: string[] = [];
  const out = highEntropyScanner.scan(text, { hit: (rule) => hits.push(rule) }, textFeatures(text));
  return { out, hits };
}

/**
 * The same text behind a space: no whole-value shortcut applies, so every run is found and
 * judged. A space is not a run character, so the runs and their verdicts are the same.
 */
function scanInProse(text: string): { out: string; hits: string[] } {
  const { out, hits } = scan(` ${text}`);
  return { out: out.slice(1), hits };
}

const chars = (alphabet: string, min: number, max: number) =>
  fc.array(fc.constantFrom(...alphabet.split('')), { minLength: min, maxLength: max }).map((cs) => cs.join(''));

const HEX_LOWER = '0123456789abcdef';
const HEX_UPPER = '0123456789ABCDEF';

describe('the high-entropy scanner: whole-value shortcuts', () => {
  it('keeps a whole value of hex of one case (a digest), as judging its run would', () => {
    fc.assert(
      fc.property(fc.oneof(chars(HEX_LOWER, 20, 300), chars(HEX_UPPER, 20, 300)), (hex) => {
        const whole = scan(hex);
        expect(whole).toEqual({ out: hex, hits: [] });
        expect(scanInProse(hex)).toEqual(whole);
      }),
    );
  });

  it('judges hex of mixed case, UUIDs of one case and near-hex as it judges them in prose', () => {
    // A UUID of mixed case is kept alone (any UUID is) but may be judged random in prose.
    const uuid = fc.oneof(
      fc.uuid(),
      fc.uuid().map((u) => u.toUpperCase()),
    );
    const nearHex = fc
      .tuple(
        chars(HEX_LOWER, 10, 60),
        fc.constantFrom('g', 'Z', '_', '-', '=', '+', '/', 'é'),
        chars(HEX_LOWER, 10, 60),
      )
      .map(([a, x, b]) => a + x + b);
    fc.assert(
      fc.property(fc.oneof(chars(`${HEX_LOWER}ABCDEF`, 20, 120), uuid, nearHex), (text) => {
        expect(scan(text)).toEqual(scanInProse(text));
      }),
      { numRuns: 2000 },
    );
  });

  it('still finds a random key of mixed-case hex, alone or in prose', () => {
    const key = '9fA3c7E1b04D6e8F2a5C9d1B7e3F0a6C';
    expect(scan(key).hits).toEqual(['high_entropy']);
    expect(scanInProse(key).hits).toEqual(['high_entropy']);
  });
});

describe('the secret-pair scanner: the hint search before names are found', () => {
  /** Names of pairs, some with a hint (`token`, `pw`, `Passwort`), most without. */
  const names = fc.constantFrom(
    'task',
    'step',
    'order',
    'level',
    'detail',
    'attempt',
    'user_name',
    'x',
    'token',
    'api_key',
    'pw',
    'sessionId',
    'Passwort',
    'clé',
    'PIN',
  );
  const values = fc.oneof(
    fc.constantFrom('1000', 'charge', 'hunter2', 'Zx9#kq2!mP', 'eyJhbGciOiJIUzI1NiJ9', 'null', '{{TOKEN}}'),
    fc.string({ minLength: 1, maxLength: 24 }),
  );
  const pair = fc
    .tuple(names, fc.constantFrom('=', ': ', ' = ', '=>', '":"'), values)
    .map(([n, sep, v]) => `${n}${sep}${v}`);
  const texts = fc.array(pair, { minLength: 1, maxLength: 4 }).map((ps) => ps.join(' '));

  it('finds nothing in a text the hint search passes over', () => {
    let skipped = 0;
    fc.assert(
      fc.property(texts, (text) => {
        if (secretPairScanner.mayMatch?.(text) !== false) return;
        skipped++;
        const hits: string[] = [];
        expect(secretPairScanner.scan(text, { hit: (r) => hits.push(r) }, textFeatures(text))).toBe(text);
        expect(hits).toEqual([]);
      }),
      { numRuns: 3000 },
    );
    expect(skipped).toBeGreaterThan(100);
  });

  it('still finds a secret under a hinted name', () => {
    expect(secretPairScanner.mayMatch?.('password=Zx9#kq2!mP')).toBe(true);
    const hits: string[] = [];
    const out = secretPairScanner.scan(
      'password=Zx9#kq2!mP',
      { hit: (r) => hits.push(r) },
      textFeatures('password=Zx9#kq2!mP'),
    );
    expect(out).not.toContain('Zx9#kq2!mP');
    expect(hits).toEqual(['secret_pair']);
  });
});
