/**
 * Packed features of a text (see {@link textFeatures}), so that the hot path allocates nothing:
 *
 * - bits 0-5: the digit count (capped at 63);
 * - bits 6-14: flags ({@link F_AT} …);
 * - bits 16-20: the longest run of digits in which single separators (` ().-/`, at most two in a
 *   row) may sit between digits (capped at 31): a card needs 13, a phone 8, and timestamps, UUIDs
 *   and hex digests have none that long;
 * - bits 21-26: the longest run of ASCII letters and digits (capped at 63): a random token needs
 *   16, and prose words, UUID groups and timestamps stay below that;
 * - bits 27-30: the longest run of digits without separators (capped at 15): a DNI needs 7,
 *   a timestamp has 4.
 */
export const DIGITS_MASK = 0x3f;
export const F_AT = 1 << 6;
export const F_UPPER = 1 << 7;
/** `-` or `_`. */
export const F_DASH = 1 << 8;
/** `:` or `=`. */
export const F_ASSIGN = 1 << 9;
export const F_DOT = 1 << 10;
/** A space or a tab. */
export const F_SPACE = 1 << 11;
/** A character outside ASCII (full-width forms, non-breaking spaces, non-Latin letters). */
export const F_NONASCII = 1 << 12;
export const F_LOWER = 1 << 13;
/** `/`, `%` or `+`. */
export const F_SLASH = 1 << 14;
const RUN_SHIFT = 16;
const MAX_RUN = 31;
const ALNUM_SHIFT = 21;
const MAX_ALNUM = 63;
const PURE_SHIFT = 27;
const MAX_PURE = 15;
const FLAGS = F_AT | F_UPPER | F_DASH | F_ASSIGN | F_DOT | F_SPACE | F_NONASCII | F_LOWER | F_SLASH;

/** Table-only bits (cleared from the result). */
const DIGIT = 1 << 27;
const RUN_SEPARATOR = 1 << 28;
const ALNUM_BIT = 29;
const ALNUM = 1 << ALNUM_BIT;

/** Flags per ASCII code, so the loop does one load per character instead of a chain of tests. */
const TABLE = (() => {
  const t = new Int32Array(128);
  for (let c = 48; c <= 57; c++) t[c] = DIGIT | ALNUM;
  for (let c = 65; c <= 90; c++) t[c] = F_UPPER | ALNUM;
  for (let c = 97; c <= 122; c++) t[c] = F_LOWER | ALNUM;
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
  t[47] = F_SLASH | RUN_SEPARATOR;
  t[37] = F_SLASH;
  t[43] = F_SLASH;
  return t;
})();

/**
 * One pass over the text that tells the scanners whether they can possibly match: the e-mail
 * scanner needs an `@` and a dot, the card scanner a digit run of 13, and so on.
 *
 * Every text of every event goes through here once, so the loop is written for the branch
 * predictor: the letter-and-digit run is extended or reset by a mask, not a branch (in prose a
 * word ends every few characters, at no predictable place), and the digit runs are looked at only
 * at a digit or while one is open (most texts hold few digits, and none in most places). Within
 * a digit run a separator may sit between digits (at most two in a row); a run already ended
 * needs no separator counted, as a digit starts it again from nothing.
 */
export function textFeatures(text: string): number {
  let digits = 0;
  let flags = 0;
  let run = 0;
  let maxRun = 0;
  let gap = 0;
  let alnum = 0;
  let maxAlnum = 0;
  let pure = 0;
  let maxPure = 0;
  const n = text.length;
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i);
    const f = c < 128 ? TABLE[c]! : F_NONASCII;
    flags |= f;
    // All ones at a letter or digit, else zero: the run grows by one or starts again.
    alnum = (alnum + 1) & -((f & ALNUM) >>> ALNUM_BIT);
    if (alnum > maxAlnum) maxAlnum = alnum;
    if ((f & DIGIT) !== 0) {
      digits++;
      pure++;
      if (pure > maxPure) maxPure = pure;
      run++;
      gap = 0;
      if (run > maxRun) maxRun = run;
    } else if (run !== 0) {
      pure = 0;
      if ((f & RUN_SEPARATOR) !== 0 && gap < 2) gap++;
      else {
        run = 0;
        gap = 0;
      }
    }
  }
  return (
    (flags & FLAGS) |
    Math.min(digits, DIGITS_MASK) |
    (Math.min(maxRun, MAX_RUN) << RUN_SHIFT) |
    (Math.min(maxAlnum, MAX_ALNUM) << ALNUM_SHIFT) |
    (Math.min(maxPure, MAX_PURE) << PURE_SHIFT)
  );
}

/** The longest separated digit run of packed features. */
export function digitRun(features: number): number {
  return (features >>> RUN_SHIFT) & MAX_RUN;
}

/** The longest run of ASCII letters and digits of packed features. */
export function alnumRun(features: number): number {
  return (features >>> ALNUM_SHIFT) & MAX_ALNUM;
}

/** The longest run of digits without separators of packed features (capped at 15). */
export function pureDigitRun(features: number): number {
  return (features >>> PURE_SHIFT) & MAX_PURE;
}
