/** Counts per ASCII code, reused: scans are synchronous, so one table serves every call. */
const COUNTS = new Int32Array(128);

const UPPER = 1;
const LOWER = 2;
const DIGIT = 4;
/** Class bits per ASCII code, plus HEX_LOWER / HEX_UPPER for the letters a-f and A-F. */
const HEX_LOWER = 8;
const HEX_UPPER = 16;
const VOWEL = 32;
const CLASS = (() => {
  const t = new Uint8Array(128);
  for (let c = 48; c <= 57; c++) t[c] = DIGIT;
  for (let c = 65; c <= 90; c++) t[c] = UPPER | (c <= 70 ? HEX_UPPER : 0);
  for (let c = 97; c <= 122; c++) t[c] = LOWER | (c <= 102 ? HEX_LOWER : 0);
  for (const v of 'aeiouAEIOU') t[v.charCodeAt(0)]! |= VOWEL;
  return t;
})();

function classOf(c: number): number {
  return c < 128 ? CLASS[c]! & 7 : 0;
}

const HEX_BITS = 0b111111;

function bitCount(n: number): number {
  let count = 0;
  for (let x = n; x !== 0; x &= x - 1) count++;
  return count;
}

/**
 * Letters of one case a run draws from: none, the six hex letters, or the whole alphabet; a few
 * letters outside hex (`SK` before a hex body) count as themselves, so a prefixed hex key is
 * measured against hex.
 */
function caseAlphabet(seen: number): number {
  if (seen === 0) return 0;
  const outside = bitCount(seen & ~HEX_BITS);
  if (outside >= 3) return 26;
  return ((seen & HEX_BITS) !== 0 ? 6 : 0) + outside;
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
 * True when the ASCII letters and digits of `text[from, to)` (anything else is skipped) look machine-generated: a
 * key, a token, a signature. Judged by structure, not by a vendor prefix:
 *
 * - which classes it mixes (upper, lower, digits), and how often consecutive characters change
 *   class (about 60 % for random base62, about 30 % for `camelCaseWords` and `order2024item7`);
 * - its entropy, against the most that text of that length and alphabet can reach
 *   (`log2(min(length, alphabet))`): at least 70 %, and 85 % when the classes rarely change;
 * - whether it reads like words glued together (vowels, short consonant clusters, few class
 *   changes inside words): `UserProfileSettings2024` is an identifier, not a key;
 * - a minimum length of 20. Shorter random ids (`cus_NffrFeUfNV2Hib`, `ch_…` of 18) are ids far
 *   more often than keys; a short key is still caught under a secret-ish name.
 *
 * Hex of one case is never random here: it is a digest, a commit id or a UUID far more often
 * than a key (a hex key is still caught under a secret-ish name). Digits alone and one-case
 * letters alone are numbers and words.
 */
export function randomRun(text: string, from: number, to: number): boolean {
  if (to - from < MIN_RANDOM) return false;
  let length = 0;
  let classes = 0;
  // Distinct letters seen, per case (bit per letter), to size the alphabet the run draws from.
  let upperSeen = 0;
  let lowerSeen = 0;
  let hexLetters = 0;
  let changes = 0;
  let digits = 0;
  let previous = 0;
  // Word-likeness: vowels among the letters, the longest consonant cluster, and the class
  // changes other than upper → lower (which every capitalised word has).
  let vowels = 0;
  let consonants = 0;
  let maxConsonants = 0;
  let wordChanges = 0;
  for (let i = from; i < to; i++) {
    const c = text.charCodeAt(i);
    const bits = c < 128 ? CLASS[c]! : 0;
    const k = bits & 7;
    if (k === 0) continue; // a separator: the characters either side are compared
    length++;
    if (k === DIGIT) {
      digits++;
      consonants = 0;
    } else {
      if (bits & (HEX_LOWER | HEX_UPPER)) hexLetters++;
      if (k === UPPER) upperSeen |= 1 << (c - 65);
      else lowerSeen |= 1 << (c - 97);
      if (bits & VOWEL) {
        vowels++;
        consonants = 0;
      } else if (++consonants > maxConsonants) maxConsonants = consonants;
    }
    classes |= bits;
    if (previous !== 0 && k !== previous) {
      changes++;
      if (!(previous === UPPER && k === LOWER)) wordChanges++;
    }
    previous = k;
  }
  if (length < MIN_RANDOM) return false;
  const changeRate = changes / (length - 1);
  let minChange: number;
  switch (classes & 7) {
    case UPPER | LOWER | DIGIT:
      minChange = 0.3;
      break;
    case UPPER | LOWER:
      minChange = 0.35;
      break;
    case LOWER | DIGIT:
    case UPPER | DIGIT:
      // Hex of one case: a digest, a commit id, a UUID.
      if (digits < 2 || digits + hexLetters === length) return false;
      minChange = 0.1;
      break;
    default:
      return false;
  }
  // Words glued together (`UserProfileSettings2024`, `release2024candidate3`) are pronounceable
  // and change class only at word boundaries; random text rarely does both.
  const letters = length - digits;
  if (vowels >= letters * 0.3 && maxConsonants <= 4 && wordChanges < (length - 1) * 0.2) return false;
  const alphabet = (digits > 0 ? 10 : 0) + caseAlphabet(upperSeen) + caseAlphabet(lowerSeen);
  const ratio = entropyAt(text, from, to) / Math.log2(Math.min(length, alphabet));
  // Frequent class changes, or an entropy close to the most the length allows.
  return ratio >= 0.7 && (changeRate >= minChange || ratio >= 0.85);
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

/** A token run judged as one: its letters and digits, with `+ / = _ -` left out. */
export function randomBase64(run: string): boolean {
  return randomRun(run, 0, run.length);
}
