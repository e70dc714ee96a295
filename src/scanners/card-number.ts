import { replaceSpans } from './replace-matches.js';
import type { Scanner } from './scanner.js';

/**
 * 13 to 19 digits, each optionally preceded by one separator (space, dash, dot, slash; no-break
 * spaces, Unicode dashes and full-width digits arrive folded to ASCII). Every repetition must
 * consume a digit, so there is one way to match; the look-around is checked at most 19 times per
 * start. Not next to a letter, so the digit groups of a UUID or a hex digest are not taken for a card.
 */
const CARD = /(?<![0-9A-Za-z])[0-9](?:[ ./-]?[0-9]){12,18}(?![0-9A-Za-z])/g;

function isSeparator(c: number): boolean {
  return c === 32 || c === 45 || c === 46 || c === 47;
}

/** True when the issuer prefix and the length fit a real card scheme (epoch-ms timestamps do not). */
function issuerValid(d: string, from: number, n: number): boolean {
  const c0 = d.charCodeAt(from) - 48;
  const p2 = c0 * 10 + d.charCodeAt(from + 1) - 48;
  const p3 = p2 * 10 + d.charCodeAt(from + 2) - 48;
  const p4 = p3 * 10 + d.charCodeAt(from + 3) - 48;
  if (c0 === 4) return n === 13 || n === 16 || n === 19; // Visa
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

/** Luhn over `digits[from, to)`, without slicing (the hot path of long digit runs). */
function luhnAt(d: string, from: number, to: number): boolean {
  let sum = 0;
  let double = false;
  for (let i = to - 1; i >= from; i--) {
    let x = d.charCodeAt(i) - 48;
    if (double) {
      x *= 2;
      if (x > 9) x -= 9;
    }
    sum += x;
    double = !double;
  }
  return sum % 10 === 0;
}

function oneDigitRepeated(d: string, from: number, to: number): boolean {
  for (let i = from + 1; i < to; i++) if (d.charCodeAt(i) !== d.charCodeAt(from)) return false;
  return true;
}

/**
 * True for a plausible card number in `digits[from, to)` (13–19 digits, issuer, Luhn, not one
 * repeated digit). Cheapest tests first: most candidates fail on the issuer prefix.
 */
export function isCardNumber(digits: string, from = 0, to = digits.length): boolean {
  const n = to - from;
  return (
    n >= 13 &&
    n <= 19 &&
    issuerValid(digits, from, n) &&
    luhnAt(digits, from, to) &&
    !oneDigitRepeated(digits, from, to)
  );
}

/** `[card …4242]`: the last four digits are what receipts and support staff use anyway. */
export function cardMarker(digits: string): string {
  return `[card …${digits.slice(-4)}]`;
}

type Group = { start: number; end: number; from: number; to: number };

/** The digit groups of a candidate (offsets in the candidate and in its digits) and its digits. */
function groupsOf(candidate: string): { compact: string; groups: Group[] } {
  const groups: Group[] = [];
  let compact = '';
  let start = 0;
  for (let i = 0; i <= candidate.length; i++) {
    const c = i < candidate.length ? candidate.charCodeAt(i) : 32;
    if (isSeparator(c)) {
      const from = compact.length;
      compact += candidate.slice(start, i);
      groups.push({ start, end: i, from, to: compact.length });
      start = i + 1;
    }
  }
  return { compact, groups };
}

/** Printed cards group their digits in threes to sixes (4-4-4-4, 4-6-5); a shorter group is not part of one. */
const MIN_GROUP = 3;

function groupLength(g: Group): number {
  return g.to - g.from;
}

/**
 * The card inside a candidate: the whole digit run, else a run of whole groups
 * (`4111-1111-1111-1111-99` holds a card in its first four groups). Returns [start, end)
 * offsets in the candidate and the end of the card in the candidate's digits. Windows only span
 * groups of three or more digits and at most 19 digits, so a long list of numbers stays cheap.
 */
function findCard(candidate: string, compact: string, groups: readonly Group[]): [number, number, number] | undefined {
  if (isCardNumber(compact)) return [0, candidate.length, compact.length];
  if (groups.length === 1) return undefined;
  for (let a = 0; a < groups.length; a++) {
    const first = groups[a]!;
    if (groupLength(first) < MIN_GROUP) continue;
    for (let b = a; b < groups.length && groupLength(groups[b]!) >= MIN_GROUP; b++) {
      const last = groups[b]!;
      const n = last.to - first.from;
      if (n > 19) break;
      if (n >= 13 && isCardNumber(compact, first.from, last.to)) return [first.start, last.end, last.to];
    }
  }
  return undefined;
}

/** Where to resume after a candidate without a card: the next group a card could start at, else its end. */
function resumeAt(groups: readonly Group[], candidateEnd: number): number {
  for (let g = 1; g < groups.length; g++) if (groupLength(groups[g]!) >= MIN_GROUP) return groups[g]!.start;
  return candidateEnd;
}

/** True when the digit run goes on after `end` (`[ ./-]?[0-9]`): a card may start in the candidate and end after it. */
function runContinues(text: string, end: number): boolean {
  const c = text.charCodeAt(end);
  if (c >= 48 && c <= 57) return true;
  const d = text.charCodeAt(end + 1);
  return isSeparator(c) && d >= 48 && d <= 57;
}

/**
 * Payment card numbers, with or without separators, Luhn- and issuer-checked.
 *
 * Written as an exec loop rather than a replace: when a candidate holds no card but the digit run
 * goes on (`qty 2 4539 8073 9823 7388`, whose first candidate stops at 19 digits), the search
 * resumes at a later group of the candidate, so a card that starts inside a candidate and ends
 * after it is still found, whatever precedes it. Resuming moves forward by at least one group of
 * three or more digits, and every candidate is at most 37 characters, so the scan stays linear.
 */
export const cardScanner: Scanner = {
  id: 'card',
  allOf: 0,
  anyOf: 0,
  minLength: 13,
  minDigits: 13,
  minRun: 13,
  minAlnum: 0,
  scan(text, sink) {
    return replaceSpans(CARD, text, (m) => {
      const candidate = m[0];
      const { compact, groups } = groupsOf(candidate);
      const found = findCard(candidate, compact, groups);
      if (found) {
        const [start, end, to] = found;
        sink.hit('card');
        const replacement = cardMarker(compact.slice(to - 4, to));
        return { start: m.index + start, end: m.index + end, replacement, resume: m.index + end };
      }
      return runContinues(text, m.index + candidate.length) ? m.index + resumeAt(groups, candidate.length) : undefined;
    });
  },
};
