import { sha256 } from '../fingerprint/sha256.js';
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
 * - Structure: a token is refused even in these characters (see `hasIdentifierStructure`):
 *   long segments mixing letters and digits, ten digits in a row (card, phone and national
 *   numbers), random-looking words of 16+ characters (hex, base62, base64url) and values whose
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

/** a-f / A-F. */
const isHexLetter = (c: number) => (c >= 97 && c <= 102) || (c >= 65 && c <= 70);

function isUuidAt(s: string, start: number, end: number): boolean {
  if (end - start !== 36) return false;
  UUID_AT.lastIndex = start;
  return UUID_AT.test(s);
}

/**
 * Whether letters and digits look drawn at random: hex with letters and digits; upper and lower
 * case in like numbers (not one capital per word as in CamelCase); a change of class (lower,
 * upper, digit) at least once every three characters, between letters and digits once every
 * four, or once every four when all three classes occur (base62, base64).
 */
function looksRandom(
  length: number,
  letters: number,
  digits: number,
  uppers: number,
  hexLetters: number,
  caseSwitches: number,
  mixSwitches: number,
): boolean {
  const switches = caseSwitches + mixSwitches;
  return (
    (digits > 0 && letters > 0 && hexLetters === letters) ||
    (uppers * 5 >= letters && (letters - uppers) * 5 >= letters && letters > 0) ||
    switches * 3 >= length ||
    mixSwitches * 4 >= length ||
    (digits > 0 && uppers > 0 && uppers < letters && switches * 4 >= length)
  );
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
export function hasIdentifierStructure(s: string): boolean {
  // Short values can only fail by a run of digits: most ids end here.
  if (s.length < WORD_RANDOM_MIN) return !DIGIT_RUN.test(s);
  // The segment.
  let segment = 0;
  let letters = 0;
  let digits = 0;
  let run = 0;
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
      previous = cls;
      continue;
    }
    if (segment > SEGMENT_MAX || (segment > SEGMENT_MIXED_MAX && letters > 0 && digits > 0)) badSegment = true;
    segment = letters = digits = run = 0;
    if (cls === JOINER) {
      word++;
      continue;
    }
    if (word > 0 && !isUuidAt(s, wordStart, i)) {
      if (badSegment) return false;
      if (word >= WORD_RANDOM_MIN && looksRandom(word, wLetters, wDigits, wUppers, wHex, wCase, wMix)) return false;
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
  return alnum < VALUE_RANDOM_MIN || !looksRandom(alnum, vLetters, vDigits, vUppers, vHex, vCase, vMix);
}

/** An identifier of at most `max` characters (see the module's summary). */
export function isIdentifier(v: string, max: number): boolean {
  return v.length <= max && !REF_FORM.test(v) && ID_CHARS.test(v) && hasIdentifierStructure(v) && !namesASecret(v);
}

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
  return v.length <= 100 && (UPPER_CODE.test(v) || ACTION.test(v)) && hasIdentifierStructure(v);
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
  if (CANONICAL_KEY.test(v)) return hasIdentifierStructure(v);
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
