import { isHexLetter, looksRandom } from '../errors/random-word.js';
import { sha256 } from '../fingerprint/sha256.js';
import {
  type CompiledIdentifierFormats,
  isBuiltinIdentifier,
  NO_DECLARED_FORMATS,
} from '../redaction/identifier-formats.js';
import { secretNameKind } from '../redaction/secret-words.js';

/**
 * The grammars of an audit event's clear-text fields. An event is told in identifiers, actions
 * and codes; whatever does not match its field's grammar becomes a keyed reference (see
 * `auditRedactor`). A grammar cannot know every secret format, so it does not try: it admits a
 * small language of plain identifiers and refuses the rest, including values whose characters
 * are allowed but whose structure is a token's.
 *
 * - Identifiers: ASCII letters and digits with the separators `. _ : / # = -`, starting and
 *   ending with a letter or digit, bounded in length. No `@` (an e-mail address is never an
 *   identifier), no white space, no `+`, `%`, quotes or control characters. UUIDs, `task:42`,
 *   `user_123`, `order-2024-0001`, `worker:host:123`, `2024-05-01T12:00:00.000Z` pass.
 * - Formats first: a value of a built-in format (UUID of any version, ULID, KSUID, ObjectId with
 *   a plausible embedded time) or of a format the application declares for the field
 *   (`identifier-formats.ts`) is an identifier whatever the rest of this grammar says.
 * - Numbers are not identifiers when written with separators (see `looksLikePersonalNumber`):
 *   three digit groups or more (`1985-04-12`, `123-45-6789`, `4111-1111-1111-1111`), two when
 *   the value does not start with a word (`850412-1234`, `04/1985`), a date with a month's name
 *   (`12Apr1985`), eight digits that read as a date, a few letters with six digits or more
 *   (`D1234567`, `12345678Z`, `AB123456C`) and the commonest human passwords. `order-2026-000123`
 *   and `PROJ-42` pass.
 * - Structure: a token is refused even in these characters (see `hasIdentifierStructure`):
 *   long segments mixing letters and digits, ten digits in a row (card, phone and national
 *   numbers), more than 16 letters of one case in a row (`key-nvuboifdjmrjxspdzvjgfava`),
 *   random-looking words of 16+ characters (hex, base62, base64url) and values whose
 *   words look random together. A UUID is admitted by its exact form. Ids that are random by
 *   design (`cus_NffrFeUfNV2Hib`, a pod name's hash suffix) are referenced too: they cannot be
 *   told from a token. Short random strings (under 16 characters, or lower-case letters and a
 *   few digits) can pass; the grammar narrows what is told, it does not recognise secrets.
 * - Actions are dotted lower-case words; resource types words joined by `. / -`; reason codes
 *   `UPPER_SNAKE` or dotted lower-case words; each with the structure check too.
 * - The library's reference forms (`hmac:`, `ref:`) are never identifiers: only a reference
 *   the keyring recognises is kept.
 * - The library's own forms pass by their exact shape: canonical and bounded idempotency keys
 *   (their decoded parts must be identifiers), job ids `idem_<sha256 of the key>` (checked
 *   against the event's key), ledger state refs `ledger:<status>@<epoch>`.
 */

const SEGMENT_MIXED_MAX = 24;
const SEGMENT_MAX = 48;
const DIGIT_RUN_MAX = 9;
const WORD_RANDOM_MIN = 16;
const VALUE_RANDOM_MIN = 20;
/** No word of an identifier is this long in one case (`internationalization` is 20: it becomes a ref). */
const SINGLE_CASE_MAX = 16;

const ID_CHARS = /^[A-Za-z0-9](?:[A-Za-z0-9._:/#=-]*[A-Za-z0-9])?$/;
const UUID_AT = /[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}/y;
const ACTION = /^[a-z][a-z0-9_]*(?:\.[a-z][a-z0-9_]*)*$/;
const TYPE_NAME = /^[A-Za-z][A-Za-z0-9_]*(?:[./-][A-Za-z0-9_]+)*$/;
const UPPER_CODE = /^[A-Z][A-Z0-9_]*$/;
const DIGIT_RUN = /[0-9]{10}/;
const STATE_REF = /^ledger:[a-z][a-z_]{0,31}@[1-9][0-9]{0,9}$/;
const LIBRARY_EVENT_ID = /^[A-Za-z0-9_-]{32}$/;
const LIBRARY_JOB_ID = /^idem_[A-Za-z0-9_-]{43}$/;
/** A part of a canonical key: percent-encoded, escapes only of identifier separators (`: / # =`). */
const KEY_PART = '(?:[A-Za-z0-9._-]|%(?:3[AaDd]|2[Ff3]))+';
const CANONICAL_KEY = new RegExp(`^${KEY_PART}:${KEY_PART}:${KEY_PART}$`);
/** A bounded key: the canonical string's first 200 characters, `#`, the SHA-256 of the whole. */
const BOUNDED_KEY = /^((?:[A-Za-z0-9._:-]|%(?:3[AaDd]|2[Ff3]))+)(%[23]?)?#[A-Za-z0-9_-]{43}$/;
const BOUNDED_PREFIX_LENGTH = 200;

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
 * An identifier of at most `max` characters (see the module's summary): a built-in format, or the
 * default word-like grammar.
 */
export function isIdentifier(v: string, max: number): boolean {
  if (v.length > max || REF_FORM.test(v)) return false;
  return isBuiltinIdentifier(v) || isWordIdentifier(v);
}

/**
 * An identifier in the event field `field`: a built-in format, a format the application declares
 * for that field or for every field (`formats`, see `identifierFormatsOf(policy)`), or the default
 * word-like grammar.
 */
export function isFieldIdentifier(
  field: string,
  v: string,
  max: number,
  formats: CompiledIdentifierFormats = NO_DECLARED_FORMATS,
): boolean {
  if (v.length > max || REF_FORM.test(v)) return false;
  return isBuiltinIdentifier(v) || formats.matches(field, v) || isWordIdentifier(v);
}

/**
 * The default grammar alone: identifier characters, an identifier's structure (random-looking
 * words from 12 characters, where keys are judged from 16), no number written with separators,
 * no run of 16 capitals, no secret named.
 */
export function isWordIdentifier(v: string): boolean {
  return (
    ID_CHARS.test(v) &&
    hasIdentifierStructure(v, SHORT_WORD_RANDOM_MIN, SHORT_WORD_RANDOM_MIN) &&
    !looksLikePersonalNumber(v) &&
    !CAPITALS_RUN.test(v) &&
    !hasRandomCase(v) &&
    !namesASecret(v)
  );
}

/**
 * True when a word (across `-` and `_`, as base64url runs) of 12 characters or more mixes the cases
 * as tokens do: with digits too (`DZFPe5885BOYA`), with a capital not starting a lower-case run
 * (`dnii_izsV948`), or with a run of one or two lower-case letters between capitals
 * (`EIQcgPXWIXOPS`), or with five consonants in a row (`qpfrejqHlzoidVl`); or mixes capitals and digits alone (`XUFJBM0ISGGB`). CamelCase words
 * (`OrderCreatedHandler`) do none of these. One pass.
 */
function hasRandomCase(s: string): boolean {
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
const SHORT_WORD_RANDOM_MIN = 12;
/** Sixteen capitals in a row: an access key id (`AKIA…`) or a base32 token, not a word. */
const CAPITALS_RUN = /[A-Z]{16}/;

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

/**
 * The form of the library's own references (`hmac:<kid>:…`, `ref:<kid>:…`). A value of that form
 * is never an identifier: a reference the keyring recognises is kept before any grammar is asked,
 * and any other (forged, or of another ring) would otherwise pass for one whenever its body
 * happened to look ordinary.
 */
const REF_FORM = /^(?:hmac|ref):/;

const NAME_VALUE = /([A-Za-z0-9_-]+)([=:])/g;

/**
 * True when `v` has the shape `<secret name>=<value>` or `<secret name>:<value>` somewhere
 * (`PGPASSWORD=…`, `db.password:…`, `api_key=…`): then what follows the name is a secret however
 * ordinary it looks. A weak name (`token`, `session`) counts only before `=`, so `session:42`
 * stays an id.
 */
function namesASecret(v: string): boolean {
  if (!v.includes('=') && !v.includes(':')) return false;
  for (const m of v.matchAll(NAME_VALUE)) {
    const kind = secretNameKind(m[1] as string);
    if (kind === 'strong' || (kind === 'weak' && m[2] === '=')) return true;
  }
  return false;
}

/** An action: dotted lower-case words (`tool.charge`, `idempotency.in_progress`). */
export function isActionName(v: string): boolean {
  return v.length <= 100 && ACTION.test(v) && hasIdentifierStructure(v);
}

/** A resource type: words of letters, digits and `_`, joined by `.`, `/` or `-` (`idempotency_key`, `s3/object`). */
export function isTypeName(v: string): boolean {
  return v.length <= 100 && TYPE_NAME.test(v) && hasIdentifierStructure(v);
}

/** A reason code: `UPPER_SNAKE` (`IDEMPOTENCY_CONFLICT`) or dotted lower-case words (`policy.ok`). */
export function isCode(v: string): boolean {
  return (
    v.length <= 100 &&
    (UPPER_CODE.test(v) || ACTION.test(v)) &&
    hasIdentifierStructure(v, SHORT_WORD_RANDOM_MIN) &&
    !CAPITALS_RUN.test(v) &&
    !hasRandomCase(v) &&
    !looksLikePersonalNumber(v)
  );
}

/** A state ref: the ledger's `ledger:<status>@<epoch>`, or an identifier. */
export function isStateRef(v: string): boolean {
  return STATE_REF.test(v) || isIdentifier(v, 255);
}

/** An event id: the library's (32 base64url characters of a SHA-256), or an identifier. */
export function isEventId(v: string): boolean {
  return LIBRARY_EVENT_ID.test(v) || isIdentifier(v, 64);
}

/**
 * An idempotency key as the library writes it (`canonicalKey`, or with `bounded` also the hashed
 * form of `boundedKey`), whose decoded parts are identifiers: a key that carries an e-mail
 * address or a token in its resource key does not pass. Its escapes are only those of
 * identifier separators, so the structure is checked on the encoded text, without decoding.
 */
export function isLibraryKey(v: string, bounded: boolean): boolean {
  if (v.length > 255) return false;
  // A namespace names an application's operations: one that reads as a date or a personal
  // number (`1996-12-09T00:25:00Z` has the key's three parts) is no key.
  if (CANONICAL_KEY.test(v)) return hasIdentifierStructure(v) && !looksLikePersonalNumber(v.slice(0, v.indexOf(':')));
  if (!bounded) return false;
  // The prefix may end inside an escape (`%2`), which the hash form cuts as it is.
  const m = BOUNDED_KEY.exec(v);
  return m !== null && m[1]!.length + (m[2]?.length ?? 0) === BOUNDED_PREFIX_LENGTH && hasIdentifierStructure(m[1]!);
}

/** Job ids checked against their key: a job's id recurs in every event of the job. */
const jobKeys = new Map<string, string>();
const MAX_JOB_KEYS = 20_000;

/**
 * A job id: the library's `idem_<base64url SHA-256 of the key>` for the event's own key (so a
 * token of that shape does not pass), or an identifier.
 */
export function isJobId(v: string, operationKey: string | undefined): boolean {
  if (!LIBRARY_JOB_ID.test(v)) return isIdentifier(v, 255);
  if (operationKey === undefined || !isLibraryKey(operationKey, true)) return false;
  if (jobKeys.get(v) === operationKey) return true;
  if (v.slice(5) !== sha256(operationKey, 'base64url')) return false;
  if (jobKeys.size >= MAX_JOB_KEYS) jobKeys.clear();
  jobKeys.set(v, operationKey);
  return true;
}
