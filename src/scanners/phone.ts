import { replaceMatches } from './replace-matches.js';
import type { Scanner } from './scanner.js';

/**
 * International numbers (`+` or `00`, 8–15 digits, with spaces, dots, dashes or parentheses) and
 * North American numbers with separators (`(555) 010-9999`, `555.010.9999`). Bare digit runs are
 * not phones: they are ids, amounts and timestamps. The runs are bounded (≤ 22 characters), so a
 * start costs a bounded number of steps. A `+` may follow a digit (`…0958+44…` holds two numbers),
 * so that replacing the first one cannot make the second one eligible on a second pass.
 */
const PHONE =
  /(?:(?<![A-Za-z_+/.-])\+|(?<![\w+/.-])00)[1-9][0-9 ().-]{6,20}[0-9](?![\w/-])|(?<![\w+/.-])\(?[2-9][0-9]{2}\)?[ .-]?[0-9]{3}[ .-][0-9]{4}(?![\w/-])/g;
const DOUBLE_SEPARATOR = /[ .-]{2}|\(\)|[.-][()]|[()][.-]/;

/** `[phone …1234]`. */
export function phoneMarker(digits: string): string {
  return `[phone …${digits.slice(-4)}]`;
}

function plausible(m: string, digits: string): boolean {
  const international = m.startsWith('+') || m.startsWith('00');
  const significant = m.startsWith('00') ? digits.length - 2 : digits.length;
  if (international ? significant < 8 || significant > 15 : digits.length !== 10) return false;
  let open = 0;
  for (const c of m) {
    if (c === '(') open++;
    else if (c === ')' && --open < 0) return false;
  }
  return open === 0 && !DOUBLE_SEPARATOR.test(m);
}

/** Telephone numbers, replaced by their last four digits. */
export const phoneScanner: Scanner = {
  id: 'phone',
  allOf: 0,
  anyOf: 0,
  minLength: 10,
  minDigits: 8,
  minRun: 8,
  minAlnum: 0,
  scan(text, sink) {
    return replaceMatches(PHONE, text, ([m]) => {
      const digits = m.replace(/[^0-9]/g, '');
      if (!plausible(m, digits)) return m;
      sink.hit('phone');
      return phoneMarker(digits);
    });
  },
};
