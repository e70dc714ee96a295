import { isHexLetter, looksRandom } from '../errors/random-word.js';

/**
 * The shape of a value written in identifier characters: an identifier's (`OrderCreatedHandler`,
 * `order-2024-0001`) or a token's (`cus_NffrFeUfNV2Hib`, a base64url secret). Counted in one pass
 * over the characters without allocating, since every clear-text field of every event goes
 * through it. Apart from the grammars (`identifier-grammar.ts`), which say which forms a field
 * admits and call these checks as one of their conditions.
 */

const SEGMENT_MIXED_MAX = 24;
const SEGMENT_MAX = 48;
const DIGIT_RUN_MAX = 9;
const WORD_RANDOM_MIN = 16;
const VALUE_RANDOM_MIN = 20;
/** No word of an identifier is this long in one case (`internationalization` is 20: it becomes a ref). */
const SINGLE_CASE_MAX = 16;

const UUID_AT = /[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}/y;
const DIGIT_RUN = /[0-9]{10}/;

// Character classes of the structure check.
const LOWER = 1;
const UPPER = 2;
const DIGIT = 3;
/** `-` and `_`: they end a segment, not a word (tokens in base64url contain them). */
const JOINER = 4;
const SEPARATOR = 5;

function classOf(c: number): number {
  if (c >= 97 && c <= 122) return LOWER;
  if (c >= 65 && c <= 90) return UPPER;
  if (c >= 48 && c <= 57) return DIGIT;
  return c === 45 || c === 95 ? JOINER : SEPARATOR;
}

function isUuidAt(s: string, start: number, end: number): boolean {
  if (end - start !== 36) return false;
  UUID_AT.lastIndex = start;
  return UUID_AT.test(s);
}

/**
 * True when `s` (of identifier characters) has the structure of an identifier rather than a
 * token. One pass over the characters, no allocation.
 *
 * A segment runs between any two separators; a word runs across `-` and `_` (base64url tokens
 * contain them). Refused: a segment longer than 48, or longer than 24 and mixing letters and
 * digits; ten digits in a row; a word of 16+ characters that looks random (see `looksRandom`),
 * and a value whose words (20+ letters and digits in all) look random together, as a token
 * cut by `/` does. Random tokens do that; `OrderCreatedHandler`, `order-2024-0001` and
 * `worker:ip-10-0-1-23.eu-west-1.compute.internal:4242` do not. A UUID word is exempt.
 */
export function hasIdentifierStructure(
  s: string,
  wordRandomMin: number = WORD_RANDOM_MIN,
  valueRandomMin: number = VALUE_RANDOM_MIN,
): boolean {
  // Short values can only fail by a run of digits: most ids end here.
  if (s.length < wordRandomMin) return !DIGIT_RUN.test(s);
  // The segment.
  let segment = 0;
  let letters = 0;
  let digits = 0;
  let run = 0;
  /** Letters of one case in a row: a run over {@link SINGLE_CASE_MAX} is a token's, not a word's. */
  let caseRun = 0;
  let badSegment = false;
  // The word.
  let wordStart = 0;
  let word = 0;
  let wLetters = 0;
  let wDigits = 0;
  let wUppers = 0;
  let wHex = 0;
  let wCase = 0;
  let wMix = 0;
  let previous = 0;
  // The value: its words together.
  let vLetters = 0;
  let vDigits = 0;
  let vUppers = 0;
  let vHex = 0;
  let vCase = 0;
  let vMix = 0;
  for (let i = 0; i <= s.length; i++) {
    const c = i < s.length ? s.charCodeAt(i) : 0;
    const cls = i < s.length ? classOf(c) : SEPARATOR;
    // A key's `%XX` escapes stand for separators (`: / # =`): one separator, three characters.
    if (c === 37) i += 2;
    if (cls <= DIGIT) {
      segment++;
      word++;
      if (cls === DIGIT) {
        digits++;
        wDigits++;
        if (++run > DIGIT_RUN_MAX) badSegment = true;
      } else {
        letters++;
        wLetters++;
        if (isHexLetter(c)) wHex++;
        if (cls === UPPER) wUppers++;
        run = 0;
      }
      if (previous !== 0 && cls !== previous) {
        if (cls === DIGIT || previous === DIGIT) wMix++;
        else wCase++;
      }
      caseRun = cls !== DIGIT && cls === previous ? caseRun + 1 : cls === DIGIT ? 0 : 1;
      if (caseRun > SINGLE_CASE_MAX) return false;
      previous = cls;
      continue;
    }
    caseRun = 0;
    if (segment > SEGMENT_MAX || (segment > SEGMENT_MIXED_MAX && letters > 0 && digits > 0)) badSegment = true;
    segment = letters = digits = run = 0;
    if (cls === JOINER) {
      word++;
      continue;
    }
    if (word > 0 && !isUuidAt(s, wordStart, i)) {
      if (badSegment) return false;
      if (word >= wordRandomMin && looksRandom(word, wLetters, wDigits, wUppers, wHex, wCase, wMix)) return false;
      vLetters += wLetters;
      vDigits += wDigits;
      vUppers += wUppers;
      vHex += wHex;
      vCase += wCase;
      vMix += wMix;
    }
    badSegment = false;
    wordStart = i + 1;
    word = wLetters = wDigits = wUppers = wHex = wCase = wMix = previous = 0;
  }
  const alnum = vLetters + vDigits;
  return alnum < valueRandomMin || !looksRandom(alnum, vLetters, vDigits, vUppers, vHex, vCase, vMix);
}

/**
 * True when a word (across `-` and `_`, as base64url runs) of 12 characters or more mixes the cases
 * as tokens do: with digits too (`DZFPe5885BOYA`), with a capital not starting a lower-case run
 * (`dnii_izsV948`), or with a run of one or two lower-case letters between capitals
 * (`EIQcgPXWIXOPS`), or with five consonants in a row (`qpfrejqHlzoidVl`); or mixes capitals and digits alone (`XUFJBM0ISGGB`). CamelCase words
 * (`OrderCreatedHandler`) do none of these. Words cut by `/` (a base64 token's alphabet has it)
 * are judged together too: a run of them of 12 characters or more is a token's when one of its
 * words mixes the cases with a token's capitals (`LFAHwMtDHMJ/YRMN`, `OC3/SKCdZFWV/AGD`), however
 * short each word. `US/NY/NYC/10001` and `acme/Orders/2024` pass. One pass.
 */
export function hasRandomCase(s: string): boolean {
  let wordStart = 0;
  let lowerRun = 0;
  let afterUpper = false;
  let suspect = false;
  let joined = false;
  /** The longest run of consonants, and the current one. */
  let consonants = 0;
  let run = 0;
  let lowers = 0;
  let uppers = 0;
  let digits = 0;
  /** The run of words joined by `/` so far: its characters, and whether a word of it mixed the cases with a token's capitals. */
  let slashRun = 0;
  let slashSuspect = false;
  for (let i = 0; i <= s.length; i++) {
    const c = i < s.length ? s.charCodeAt(i) : 0;
    const lowerC = c >= 97 && c <= 122;
    const upperC = c >= 65 && c <= 90;
    const digitC = c >= 48 && c <= 57;
    if (!lowerC && !upperC && !digitC && c !== 45 && c !== 95) {
      const mixed = lowers > 0 && uppers > 0;
      const token =
        (mixed && (suspect || digits > 0)) ||
        ((mixed || digits > 0) && consonants >= CONSONANT_RUN) ||
        (!joined && lowers === 0 && uppers > 0 && digits > 0);
      if (token && i - wordStart >= SHORT_WORD_RANDOM_MIN) return true;
      slashRun += i - wordStart;
      if (mixed && suspect) slashSuspect = true;
      if (c !== 47) {
        if (slashSuspect && slashRun >= SHORT_WORD_RANDOM_MIN) return true;
        slashRun = 0;
        slashSuspect = false;
      }
      wordStart = i + 1;
      lowerRun = lowers = uppers = digits = run = consonants = 0;
      afterUpper = suspect = joined = false;
      continue;
    }
    if (c === 45 || c === 95) joined = true;
    if ((lowerC || upperC) && !VOWELS.has(c | 32)) consonants = Math.max(consonants, ++run);
    else run = 0;
    if (lowerC) {
      lowerRun++;
      lowers++;
      afterUpper = false;
      continue;
    }
    // A capital followed by anything but a lower-case letter, inside the word.
    if (afterUpper && i < s.length) suspect = true;
    if (upperC && lowerRun > 0 && lowerRun <= 2 && i - lowerRun - 1 >= wordStart) {
      const before = s.charCodeAt(i - lowerRun - 1);
      if (before >= 65 && before <= 90) suspect = true;
    }
    if (upperC) uppers++;
    else if (digitC) digits++;
    afterUpper = upperC;
    lowerRun = 0;
  }
  return false;
}

/** Vowels (and y), lower case. */
const VOWELS: ReadonlySet<number> = new Set([...'aeiouy'].map((c) => c.charCodeAt(0)));
/** Five consonants in a row: words rarely have them (`strength` has four), random letters often. */
const CONSONANT_RUN = 5;

/** Random-looking words are refused from this length in the default grammar (tokens of 12-15 characters). */
export const SHORT_WORD_RANDOM_MIN = 12;
/** Sixteen capitals in a row: an access key id (`AKIA…`) or a base32 token, not a word. */
export const CAPITALS_RUN = /[A-Z]{16}/;
