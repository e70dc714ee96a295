import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { defineRedactionPolicy, redactString } from '../../src/redaction/index.js';
import { ALL_SCANNERS } from '../../src/scanners/all-scanners.js';

/**
 * One run of a single character class, as long as the largest string limit a policy may set
 * (16 MiB), through every scanner and the whole redaction path: no scanner may throw (a regex's
 * greedy repeat over one run that long exhausts V8's backtracking stack: a RangeError). What is
 * random goes; what is not stays.
 */
const MiB = 1 << 20;
const LENGTH = 16 * MiB;

function from(alphabet: string, n: number): string {
  const bytes = randomBytes(n);
  const parts: string[] = [];
  for (let at = 0; at < n; at += 65_536) {
    let s = '';
    for (let i = at; i < Math.min(n, at + 65_536); i++) s += alphabet[(bytes[i] as number) % alphabet.length];
    parts.push(s);
  }
  return parts.join('');
}

const policy = defineRedactionPolicy({
  version: 'long-runs-1',
  hmacKeys: [{ id: 'k1', secret: 'long-runs-hmac-key-0123456789abcdef0123456789' }],
  limits: { maxStringLength: LENGTH, maxDepth: 1000, scanBudget: 1 << 30, maxReceiptPaths: 200 },
});

const RUNS: [name: string, make: () => string, random: boolean][] = [
  [
    'letters and digits, random',
    () => from('abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789', LENGTH),
    true,
  ],
  // A hex run stays (digests are not secrets): it must not throw either.
  ['hex, random', () => from('0123456789abcdef', LENGTH), false],
  ['one letter', () => 'a'.repeat(LENGTH), false],
  ['dashes', () => '-'.repeat(LENGTH), false],
];

describe('scanners on one run of 16 MiB', () => {
  it.each(RUNS)(
    '%s: no scanner throws, nor the redaction path',
    (_name, make, random) => {
      const text = make();
      for (const scanner of ALL_SCANNERS) {
        expect(() => scanner.scan(text, { hit() {} }, 0xffffffff), scanner.id).not.toThrow();
      }
      const out = redactString(text, policy);
      if (random) expect(out).not.toContain(text.slice(LENGTH / 2, LENGTH / 2 + 40));
      else expect(out.length).toBeGreaterThan(0);
    },
    600_000,
  );
});
