/**
 * Numbers written as people write personal numbers (dates, phone and national numbers, cards in
 * groups, passport and licence numbers) and the commonest human passwords: values made of
 * identifier characters that must still never be told in clear. A check of its own, beside the
 * structure check (`identifier-structure.ts`): it reads digit groups and separators where that
 * one reads letters against digits.
 */

const MONTHS: ReadonlySet<string> = new Set(
  'jan feb mar apr may jun jul aug sep sept oct nov dec january february march april june july august september october november december'.split(
    ' ',
  ),
);

/** The commonest human passwords (a value equal to one, ignoring case and trailing digits). */
const COMMON_PASSWORDS: ReadonlySet<string> = new Set(
  'password passw0rd p4ssw0rd qwerty qwertyuiop letmein iloveyou admin administrator welcome monkey dragon hunter sunshine princess football baseball master shadow trustno abc changeme secret qazwsx zaq azerty'.split(
    ' ',
  ),
);

const TRAILING_DIGITS = /[0-9]+$/;

/** YYYYMMDD or DDMMYYYY with a year of 1900-2099 (eight digits at `i`). */
function isCompactDate(s: string, i: number): boolean {
  const n = (a: number, b: number) => Number(s.slice(i + a, i + b));
  const date = (y: number, m: number, d: number) => y >= 1900 && y <= 2099 && m >= 1 && m <= 12 && d >= 1 && d <= 31;
  return date(n(0, 4), n(4, 6), n(6, 8)) || date(n(4, 8), n(2, 4), n(0, 2));
}

/**
 * True when `s` holds a number written as people write personal numbers: a date, a phone number,
 * a national id, a card number in groups, a passport or licence number (see the module's summary).
 * One pass over the characters.
 */
export function looksLikePersonalNumber(s: string): boolean {
  const base = s.toLowerCase().replace(TRAILING_DIGITS, '');
  if (COMMON_PASSWORDS.has(base)) return true;
  let totalDigits = 0;
  // The digit chain: digit-only segments joined by single separators.
  let groups = 0;
  let chainDigits = 0;
  let chainAfterWord = false;
  /** The longest group of the chain: four groups of one to three digits after a word are a host's address (`ip-10-0-1-23`). */
  let chainWidest = 0;
  let sawWord = false;
  // The current segment (between separators).
  let segLetters = 0;
  let segLower = 0;
  let segDigits = 0;
  let segSwitches = 0;
  let totalLetters = 0;
  let prevClass = 0;
  let run = 0;
  let alphaStart = -1;
  let month = false;
  let separators = 0;
  for (let i = 0; i <= s.length; i++) {
    const c = i < s.length ? s.charCodeAt(i) : 0;
    const digit = c >= 48 && c <= 57;
    const letter = (c >= 65 && c <= 90) || (c >= 97 && c <= 122);
    if (!letter && alphaStart >= 0) {
      if (MONTHS.has(s.slice(alphaStart, i).toLowerCase())) month = true;
      alphaStart = -1;
    } else if (letter && alphaStart < 0) alphaStart = i;
    if (digit) {
      totalDigits++;
      if (++run === 8 && (i + 1 >= s.length || !isDigitAt(s, i + 1)) && (i < 8 || !isDigitAt(s, i - 8))) {
        if (isCompactDate(s, i - 7)) return true;
      }
    } else run = 0;
    if (digit || letter) {
      const cls = digit ? 1 : 2;
      if (prevClass !== 0 && prevClass !== cls) segSwitches++;
      prevClass = cls;
      if (digit) segDigits++;
      else {
        segLetters++;
        totalLetters++;
        if (c >= 97) segLower++;
      }
      continue;
    }
    // A segment ends.
    if (segDigits + segLetters > 0) {
      if (
        segLetters > 0 &&
        ((segDigits >= 6 && segLetters <= 2) ||
          (segDigits >= 8 && segLetters <= 3) ||
          (segDigits >= 5 && segSwitches >= 2) ||
          (segDigits >= 4 && segSwitches >= 2 && segLower === 0))
      )
        return true;
      if (segLetters === 0) {
        if (groups > 0 && separators === 1) {
          groups++;
          chainDigits += segDigits;
          chainWidest = Math.max(chainWidest, segDigits);
        } else {
          groups = 1;
          chainDigits = chainWidest = segDigits;
          chainAfterWord = sawWord;
        }
        const hostAddress = chainAfterWord && groups === 4 && chainWidest <= 3;
        if (chainDigits >= 6 && !hostAddress && (groups >= 3 || (groups === 2 && !chainAfterWord))) return true;
        // An IPv4 address on its own (`78.0.9.1`).
        if (groups === 4 && !chainAfterWord) return true;
      } else {
        groups = 0;
        sawWord = true;
      }
      separators = 0;
    }
    separators++;
    segLetters = segLower = segDigits = segSwitches = prevClass = 0;
  }
  // A number with a check letter or two (`34227650-Z`, `160882-742V`).
  if (totalLetters <= 2 && totalDigits >= 6) return true;
  return month && totalDigits >= 4;
}

const isDigitAt = (s: string, i: number) => {
  const c = s.charCodeAt(i);
  return c >= 48 && c <= 57;
};
