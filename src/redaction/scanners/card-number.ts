import { luhnValid } from './checksums.js';
import type { Scanner } from './scanner.js';

/**
 * 13 to 19 digits, each optionally preceded by one space or dash. Every repetition must consume a
 * digit, so there is one way to match; the look-around is checked at most 19 times per start. Not
 * next to a letter, so the digit groups of a UUID or a hex digest are not taken for a card.
 */
const CARD = /(?<![0-9A-Za-z\]])[0-9](?:[ -]?[0-9]){12,18}(?![0-9A-Za-z[])/g;

/** True when the issuer prefix and the length fit a real card scheme (epoch-ms timestamps do not). */
export function cardIssuerValid(d: string): boolean {
  const n = d.length;
  const p2 = Number(d.slice(0, 2));
  const p3 = Number(d.slice(0, 3));
  const p4 = Number(d.slice(0, 4));
  if (d[0] === '4') return n === 13 || n === 16 || n === 19; // Visa
  if ((p2 >= 51 && p2 <= 55) || (p4 >= 2221 && p4 <= 2720)) return n === 16; // Mastercard
  if (p2 === 34 || p2 === 37) return n === 15; // Amex
  if (p4 >= 2200 && p4 <= 2204) return n === 16; // Mir
  if (p4 === 6011 || p2 === 65 || (p3 >= 644 && p3 <= 649)) return n >= 16; // Discover
  if (p4 >= 3528 && p4 <= 3589) return n >= 16; // JCB
  if ((p3 >= 300 && p3 <= 305) || p2 === 36 || p2 === 38 || p2 === 39) return n >= 14; // Diners
  if (p2 === 62) return n >= 16; // UnionPay
  if (p2 === 50 || (p2 >= 56 && p2 <= 69)) return n >= 13; // Maestro
  return false;
}

/** True for a plausible card number (13–19 digits, issuer, Luhn, not one repeated digit). */
export function isCardNumber(digits: string): boolean {
  return (
    digits.length >= 13 &&
    digits.length <= 19 &&
    !/^(\d)\1*$/.test(digits) &&
    cardIssuerValid(digits) &&
    luhnValid(digits)
  );
}

/** `[card …4242]`: the last four digits are what receipts and support staff use anyway. */
export function cardMarker(digits: string): string {
  return `[card …${digits.slice(-4)}]`;
}

/** More digit groups than this is a list of numbers, not a printed card (4-4-4-4-3 has five). */
const MAX_GROUPS = 8;

/**
 * The card inside a candidate: the whole digit run, else a run of whole groups
 * (`4111-1111-1111-1111-99` holds a card in its first four groups). Returns [start, end)
 * offsets in the candidate. At most 36 windows are tried, so a long list of digits stays cheap.
 */
function findCard(candidate: string): [number, number] | undefined {
  const compact = candidate.replaceAll(' ', '').replaceAll('-', '');
  if (isCardNumber(compact)) return [0, candidate.length];
  const separators = candidate.length - compact.length;
  if (separators === 0 || separators >= MAX_GROUPS) return undefined;
  const groups: { start: number; end: number; from: number; to: number }[] = [];
  let start = 0;
  let digits = 0;
  for (let i = 0; i <= candidate.length; i++) {
    const c = i < candidate.length ? candidate.charCodeAt(i) : 32;
    if (c === 32 || c === 45) {
      groups.push({ start, end: i, from: digits - (i - start), to: digits });
      start = i + 1;
    } else digits++;
  }
  for (let a = 0; a < groups.length; a++) {
    for (let b = groups.length - 1; b >= a; b--) {
      const first = groups[a]!;
      const last = groups[b]!;
      const n = last.to - first.from;
      if (n >= 13 && n <= 19 && isCardNumber(compact.slice(first.from, last.to))) return [first.start, last.end];
    }
  }
  return undefined;
}

/** Payment card numbers, with or without separators, Luhn- and issuer-checked. */
export const cardScanner: Scanner = {
  id: 'card',
  allOf: 0,
  anyOf: 0,
  minLength: 13,
  minDigits: 13,
  scan(text, sink) {
    return text.replace(CARD, (m) => {
      const found = findCard(m);
      if (!found) return m;
      const [start, end] = found;
      sink.hit('card');
      const digits = m.slice(start, end).replaceAll(' ', '').replaceAll('-', '');
      return m.slice(0, start) + cardMarker(digits) + m.slice(end);
    });
  },
};
