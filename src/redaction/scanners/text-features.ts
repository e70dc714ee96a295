/** Bit flags of {@link textFeatures}; the low 8 bits hold the digit count (capped at 255). */
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

/** Marks a digit in {@link TABLE} (bit 0, counted rather than or-ed). */
const DIGIT = 1;

/** Flags per ASCII code, so the loop does one load per character instead of a chain of tests. */
const TABLE = (() => {
  const t = new Uint16Array(128);
  for (let c = 48; c <= 57; c++) t[c] = DIGIT;
  for (let c = 65; c <= 90; c++) t[c] = F_UPPER;
  t[64] = F_AT;
  t[45] = F_DASH;
  t[95] = F_DASH;
  t[58] = F_ASSIGN;
  t[61] = F_ASSIGN;
  t[46] = F_DOT;
  t[32] = F_SPACE;
  t[9] = F_SPACE;
  return t;
})();

/**
 * One pass over the text that tells the scanners whether they can possibly match: the e-mail
 * scanner needs an `@` and a dot, the card scanner 13 digits, and so on. Packed in a number so
 * that the hot path allocates nothing.
 */
export function textFeatures(text: string): number {
  let digits = 0;
  let flags = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c < 128) {
      const f = TABLE[c]!;
      flags |= f;
      digits += f & DIGIT;
    }
  }
  return (flags & ~DIGITS_MASK) | Math.min(digits, 255);
}
