import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { highEntropyScanner } from '../../src/scanners/high-entropy.js';
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
