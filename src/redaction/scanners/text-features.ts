/** Bit flags of {@link textFeatures}; the low 8 bits hold the digit count (capped at 255). */
export const F_AT = 1 << 8;
export const F_UPPER = 1 << 9;
/** `-` or `_`. */
export const F_DASH = 1 << 10;
/** `:` or `=`. */
export const F_ASSIGN = 1 << 11;

/**
 * One pass over the text that tells the scanners whether they can possibly match: the e-mail
 * scanner needs an `@`, the card scanner 13 digits, and so on. Packed in a number so that the
 * hot path allocates nothing.
 */
export function textFeatures(text: string): number {
  let digits = 0;
  let flags = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c >= 48 && c <= 57) digits++;
    else if (c >= 65 && c <= 90) flags |= F_UPPER;
    else if (c === 64) flags |= F_AT;
    else if (c === 45 || c === 95) flags |= F_DASH;
    else if (c === 58 || c === 61) flags |= F_ASSIGN;
  }
  return flags | (digits > 255 ? 255 : digits);
}

/** Digit count from packed features (255 means "255 or more"). */
export function digitCount(features: number): number {
  return features & 0xff;
}
