import { ibanValid } from './checksums.js';
import { IBAN_LENGTHS } from './iban-lengths.js';
import { replaceMatches } from './replace-matches.js';
import type { Scanner } from './scanner.js';
import { digitRun } from './text-features.js';

/**
 * Country code, check digits, then up to 30 characters each optionally preceded by one space or
 * dash, in either case: each repetition consumes one character, so there is one way to match and
 * no backtracking beyond the 30 repetitions.
 */
const IBAN = /(?<![A-Za-z0-9])[A-Za-z]{2}[0-9]{2}(?:[ -]?[A-Za-z0-9]){11,30}/g;

/** `[iban DE…3000]`: country and last four, as bank statements show them. */
export function ibanMarker(compact: string): string {
  return `[iban ${compact.slice(0, 2)}…${compact.slice(-4)}]`;
}

/** Offset in `candidate` after its first `count` non-space characters. */
function offsetAfter(candidate: string, count: number): number {
  let seen = 0;
  for (let i = 0; i < candidate.length; i++) {
    const c = candidate.charCodeAt(i);
    if (c !== 32 && c !== 45 && ++seen === count) return i + 1;
  }
  return -1;
}

/**
 * IBANs, compact or printed in groups of four, checked against the country's length and mod 97;
 * the characters after the IBAN ("… EUR") stay.
 */
export const ibanScanner: Scanner = {
  id: 'iban',
  allOf: 0,
  anyOf: 0,
  minLength: 15,
  minDigits: 10,
  minRun: 0,
  minAlnum: 0,
  // Every country's IBAN holds a run of 10+ digits (compact, or in printed groups of four).
  gate: (f) => digitRun(f) >= 10,
  scan(text, sink) {
    return replaceMatches(IBAN, text, ([m]) => {
      const length = IBAN_LENGTHS.get(m.slice(0, 2).toUpperCase());
      if (length === undefined) return m;
      const end = offsetAfter(m, length);
      if (end < 0) return m;
      const compact = m.slice(0, end).replace(/[ -]/g, '').toUpperCase();
      if (!ibanValid(compact)) return m;
      sink.hit('iban');
      return ibanMarker(compact) + m.slice(end);
    });
  },
};
