/**
 * Packed features of a text (see {@link textFeatures}): bits 0-7 the digit count (capped at
 * 255), bits 8-13 flags, bits 16-20 the longest run of digits in which single separators
 * (` ().-`, at most two in a row) may sit between digits (capped at 31): a card needs a run of 13,
 * a phone 8, and timestamps, UUIDs and hex digests have none that long.
 */
export const DIGITS_MASK = 0xff;
export const F_AT = 1 << 8;
export const F_UPPER = 1 << 9;
/** `-` or `_`. */
export const F_DASH = 1 << 10;
/** `:` or `=`. */
export const F_ASSIGN = 1 << 11;
export const F_DOT = 1 << 12;
/** A space or a tab. */
export const F_SPACE = 1 << 13;
const RUN_SHIFT = 16;
const MAX_RUN = 31;

/** Table-only bits (cleared from the result): a digit, a separator inside a digit run. */
const DIGIT = 1 << 14;
const RUN_SEPARATOR = 1 << 15;

/** Flags per ASCII code, so the loop does one load per character instead of a chain of tests. */
const TABLE = (() => {
  const t = new Uint16Array(128);
  for (let c = 48; c <= 57; c++) t[c] = DIGIT;
  for (let c = 65; c <= 90; c++) t[c] = F_UPPER;
  t[64] = F_AT;
  t[45] = F_DASH | RUN_SEPARATOR;
  t[95] = F_DASH;
  t[58] = F_ASSIGN;
  t[61] = F_ASSIGN;
  t[46] = F_DOT | RUN_SEPARATOR;
  t[32] = F_SPACE | RUN_SEPARATOR;
  t[9] = F_SPACE;
  t[40] = RUN_SEPARATOR;
  t[41] = RUN_SEPARATOR;
  return t;
})();

/**
 * One pass over the text that tells the scanners whether they can possibly match: the e-mail
 * scanner needs an `@` and a dot, the card scanner a digit run of 13, and so on. Packed in a
 * number so that the hot path allocates nothing.
 */
export function textFeatures(text: string): number {
  let digits = 0;
  let flags = 0;
  let run = 0;
  let maxRun = 0;
  let gap = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    const f = c < 128 ? TABLE[c]! : 0;
    flags |= f;
    if (f & DIGIT) {
      digits++;
      run++;
      gap = 0;
      if (run > maxRun) maxRun = run;
    } else if (f & RUN_SEPARATOR && gap < 2) gap++;
    else {
      run = 0;
      gap = 0;
    }
  }
  return (
    (flags & (F_AT | F_UPPER | F_DASH | F_ASSIGN | F_DOT | F_SPACE)) |
    Math.min(digits, DIGITS_MASK) |
    (Math.min(maxRun, MAX_RUN) << RUN_SHIFT)
  );
}

/** The longest separated digit run of packed features. */
export function digitRun(features: number): number {
  return features >>> RUN_SHIFT;
}
