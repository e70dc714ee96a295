/** Counts per ASCII code, reused: scans are synchronous, so one table serves every call. */
const COUNTS = new Int32Array(128);

const UPPER = 1;
const LOWER = 2;
const DIGIT = 4;
/** Class bits per ASCII code, plus HEX_LOWER / HEX_UPPER for the letters a-f and A-F. */
const HEX_LOWER = 8;
const HEX_UPPER = 16;
const CLASS = (() => {
  const t = new Uint8Array(128);
  for (let c = 48; c <= 57; c++) t[c] = DIGIT;
  for (let c = 65; c <= 90; c++) t[c] = UPPER | (c <= 70 ? HEX_UPPER : 0);
  for (let c = 97; c <= 122; c++) t[c] = LOWER | (c <= 102 ? HEX_LOWER : 0);
  return t;
})();

function classOf(c: number): number {
  return c < 128 ? CLASS[c]! & 7 : 0;
}

/** The shortest run judged random. */
const MIN_RANDOM = 20;

/** Shannon entropy (bits per character) of the ASCII letters and digits in `text[from, to)`. */
export function entropyAt(text: string, from: number, to: number): number {
  let n = 0;
  for (let i = from; i < to; i++) {
    const c = text.charCodeAt(i);
    if (classOf(c) !== 0) {
      COUNTS[c]!++;
      n++;
    }
  }
  let bits = 0;
  for (let i = from; i < to; i++) {
    const c = text.charCodeAt(i);
    const k = c < 128 ? COUNTS[c]! : 0;
    if (k > 0) {
      const p = k / n;
      bits -= p * Math.log2(p);
      COUNTS[c] = 0;
    }
  }
  return bits;
}

/**
 * True when `text[from, to)`, a run of ASCII letters and digits, looks machine-generated: a
 * key, a token, a signature. Judged by structure, not by a vendor prefix:
 *
 * - which classes it mixes (upper, lower, digits), and how often consecutive characters change
 *   class (about 60 % for random base62, about 30 % for `camelCaseWords` and `order2024item7`);
 * - its entropy, against what random text of that length reaches (`0.75·log2(min(length, 62))`);
 * - a minimum length per mix: 20 with all three classes or with digits and one case, 24 for
 *   letters only. Shorter random ids (`cus_NffrFeUfNV2Hib`, `ch_…` of 18) are ids far more often
 *   than keys; a short key is still caught under a secret-ish name.
 *
 * Hex of one case is never random here: it is a digest, a commit id or a UUID far more often
 * than a key (a hex key is still caught under a secret-ish name). Digits alone and one-case
 * letters alone are numbers and words.
 */
export function randomRun(text: string, from: number, to: number): boolean {
  const length = to - from;
  if (length < MIN_RANDOM) return false;
  let classes = 0;
  let hexLetters = 0;
  let changes = 0;
  let digits = 0;
  let previous = 0;
  for (let i = from; i < to; i++) {
    const c = text.charCodeAt(i);
    const bits = c < 128 ? CLASS[c]! : 0;
    const k = bits & 7;
    if (k === DIGIT) digits++;
    else if (bits & (HEX_LOWER | HEX_UPPER)) hexLetters++;
    classes |= bits;
    if (previous !== 0 && k !== previous) changes++;
    previous = k;
  }
  const changeRate = changes / (length - 1);
  switch (classes & 7) {
    case UPPER | LOWER | DIGIT:
      if (changeRate < 0.3) return false;
      break;
    case UPPER | LOWER:
      if (length < 24 || changeRate < 0.4) return false;
      break;
    case LOWER | DIGIT:
    case UPPER | DIGIT:
      if (changeRate < 0.25 || digits < length * 0.1 || digits > length * 0.9) return false;
      // Hex of one case: a digest, a commit id, a UUID.
      if (digits + hexLetters === length) return false;
      break;
    default:
      return false;
  }
  return entropyAt(text, from, to) >= 0.75 * Math.log2(Math.min(length, 62));
}

/**
 * True when a whole value (a password field's value, a query parameter) looks random: one of its
 * `[A-Za-z0-9]` segments does, or, for a base64 value of 32+ characters, all of them together.
 */
export function randomValue(text: string): boolean {
  let start = -1;
  let alnum = 0;
  let base64 = true;
  for (let i = 0; i <= text.length; i++) {
    const c = i < text.length ? text.charCodeAt(i) : 32;
    if (classOf(c) !== 0) {
      if (start < 0) start = i;
      alnum++;
      continue;
    }
    if (start >= 0 && randomRun(text, start, i)) return true;
    start = -1;
    if (i < text.length && c !== 43 && c !== 47 && c !== 61) base64 = false;
  }
  return base64 && alnum >= 32 && randomBase64(text);
}

/** A base64 run judged as one: its letters and digits with `+`, `/` and `=` left out. */
export function randomBase64(run: string): boolean {
  const compact = run.replace(/[+/=]/g, '');
  return randomRun(compact, 0, compact.length);
}
