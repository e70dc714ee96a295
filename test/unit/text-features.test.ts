import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  alnumRun,
  DIGITS_MASK,
  digitRun,
  F_AT,
  F_DASH,
  F_NONASCII,
  F_SPACE,
  pureDigitRun,
  textFeatures,
} from '../../src/scanners/text-features.js';

/** The features as their definitions read, one test per character: the scanners' gates rely on every bit. */
function reference(text: string): number {
  let flags = 0;
  let digits = 0;
  let run = 0;
  let maxRun = 0;
  let gap = 0;
  let alnum = 0;
  let maxAlnum = 0;
  let pure = 0;
  let maxPure = 0;
  for (const ch of text.split('')) {
    const c = ch.charCodeAt(0);
    const digit = c >= 48 && c <= 57;
    const upper = c >= 65 && c <= 90;
    const lower = c >= 97 && c <= 122;
    if (c >= 128) flags |= F_NONASCII;
    if (upper) flags |= 1 << 7;
    if (lower) flags |= 1 << 13;
    if (c === 64) flags |= F_AT;
    if (c === 45 || c === 95) flags |= F_DASH;
    if (c === 58 || c === 61) flags |= 1 << 9;
    if (c === 46) flags |= 1 << 10;
    if (c === 32 || c === 9) flags |= F_SPACE;
    if (c === 47 || c === 37 || c === 43) flags |= 1 << 14;
    alnum = digit || upper || lower ? alnum + 1 : 0;
    maxAlnum = Math.max(maxAlnum, alnum);
    const separator = c === 45 || c === 46 || c === 32 || c === 40 || c === 41 || c === 47;
    if (digit) {
      digits++;
      pure++;
      run++;
      gap = 0;
    } else if (separator && gap < 2) {
      gap++;
      pure = 0;
    } else {
      pure = 0;
      run = 0;
      gap = 0;
    }
    maxPure = Math.max(maxPure, pure);
    maxRun = Math.max(maxRun, run);
  }
  return (
    flags |
    Math.min(digits, DIGITS_MASK) |
    (Math.min(maxRun, 31) << 16) |
    (Math.min(maxAlnum, 63) << 21) |
    (Math.min(maxPure, 15) << 27)
  );
}

/** Characters that each touch some feature, so that random texts exercise every run and flag. */
const CHARS = 'aZ09 -._:=@/%+()\t\n,\u00a0\uff10é#';
const text = fc.oneof(
  fc.array(fc.constantFrom(...CHARS.split('')), { maxLength: 120 }).map((cs) => cs.join('')),
  fc.string({ maxLength: 60 }),
  fc
    .tuple(fc.nat(80), fc.constantFrom('', ' ', '-', '--', '---', 'a', '\u00e9'), fc.nat(80))
    .map(([a, sep, b]) => `${'7'.repeat(a)}${sep}${'4'.repeat(b)}`),
);

describe('textFeatures', () => {
  it('packs the same features as a character-by-character reading', () => {
    fc.assert(
      fc.property(text, (t) => {
        expect(textFeatures(t)).toBe(reference(t));
      }),
      { numRuns: 3000 },
    );
  });

  it('takes runs that end the text as well as runs that end inside it', () => {
    const f = textFeatures('order 4539 8073 9823 7388');
    expect(digitRun(f)).toBe(16);
    expect(pureDigitRun(f)).toBe(4);
    expect(alnumRun(textFeatures('x sk_live_ABCDEFGHIJKLMNOPQRSTUVWX'))).toBe(24);
    expect(pureDigitRun(textFeatures('id 12345678'))).toBe(8);
  });
});
