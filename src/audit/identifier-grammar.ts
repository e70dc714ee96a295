import { jobIdOfKey } from '../keys/job-id.js';
import {
  type CompiledIdentifierFormats,
  isBuiltinIdentifier,
  NO_DECLARED_FORMATS,
} from '../redaction/identifier-formats.js';
import { secretNameKind } from '../scanners/index.js';
import { holdsProviderToken } from '../scanners/provider-tokens.js';
import { CAPITALS_RUN, hasIdentifierStructure, hasRandomCase, SHORT_WORD_RANDOM_MIN } from './identifier-structure.js';
import { looksLikePersonalNumber } from './personal-number.js';

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
 *   told from a token. Short random strings (16 characters or fewer: a few in ten thousand
 *   draws, see docs/audit-verify.md; or lower-case letters and a few digits) can pass; the
 *   grammar narrows what is told, it does not recognise secrets.
 * - Actions are dotted lower-case words; resource types words joined by `. / -`; reason codes
 *   `UPPER_SNAKE` or dotted lower-case words; each with the structure check too.
 * - A recognised provider token (`glpat-…`, `sk_live_…`, `ghp_…`, `AKIA…`, as the provider-token
 *   scanner knows them) is never an identifier, whatever its body looks like.
 * - The library's reference forms (`hmac:`, `ref:`) are never identifiers: only a reference
 *   the keyring recognises is kept.
 * - The library's own forms pass by their exact shape: canonical and bounded idempotency keys
 *   (their decoded parts must be identifiers), job ids `idem_<sha256 of the key>` (checked
 *   against the event's key), ledger state refs `ledger:<status>@<epoch>`.
 */

const ID_CHARS = /^[A-Za-z0-9](?:[A-Za-z0-9._:/#=-]*[A-Za-z0-9])?$/;
const ACTION = /^[a-z][a-z0-9_]*(?:\.[a-z][a-z0-9_]*)*$/;
const TYPE_NAME = /^[A-Za-z][A-Za-z0-9_]*(?:[./-][A-Za-z0-9_]+)*$/;
const UPPER_CODE = /^[A-Z][A-Z0-9_]*$/;
const STATE_REF = /^ledger:[a-z][a-z_]{0,31}@[1-9][0-9]{0,9}$/;
const LIBRARY_EVENT_ID = /^[A-Za-z0-9_-]{32}$/;
const LIBRARY_JOB_ID = /^idem_[A-Za-z0-9_-]{43}$/;
/** A part of a canonical key: percent-encoded, escapes only of identifier separators (`: / # =`). */
const KEY_PART = '(?:[A-Za-z0-9._-]|%(?:3[AaDd]|2[Ff3]))+';
const CANONICAL_KEY = new RegExp(`^${KEY_PART}:${KEY_PART}:${KEY_PART}$`);
/** A bounded key: the canonical string's first 200 characters, `#`, the SHA-256 of the whole. */
const BOUNDED_KEY = /^((?:[A-Za-z0-9._:-]|%(?:3[AaDd]|2[Ff3]))+)(%[23]?)?#[A-Za-z0-9_-]{43}$/;
const BOUNDED_PREFIX_LENGTH = 200;

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
    !namesASecret(v) &&
    !holdsProviderToken(v)
  );
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
 * Canonical keys that passed {@link isLibraryKey} (in either form it is asked for): a key is told
 * in several fields of each of its events (resource, operation, and the job id's check), and its
 * check runs a structure test over the whole key. Only passing keys are kept (they are stored in
 * clear anyway); past the bound the memory starts over.
 */
const canonicalKeys = new Set<string>();
const MAX_CANONICAL_KEYS = 4096;

/**
 * An idempotency key as the library writes it (`canonicalKey`, or with `bounded` also the hashed
 * form of `boundedKey`), whose decoded parts are identifiers: a key that carries an e-mail
 * address or a token in its resource key does not pass. Its escapes are only those of
 * identifier separators, so the structure is checked on the encoded text, without decoding.
 */
export function isLibraryKey(v: string, bounded: boolean): boolean {
  if (canonicalKeys.has(v)) return true;
  if (v.length > 255) return false;
  if (CANONICAL_KEY.test(v)) {
    // A namespace names an application's operations: one that reads as a date or a personal
    // number (`1996-12-09T00:25:00Z` has the key's three parts) is no key.
    if (!hasIdentifierStructure(v) || looksLikePersonalNumber(v.slice(0, v.indexOf(':')))) return false;
    if (canonicalKeys.size >= MAX_CANONICAL_KEYS) canonicalKeys.clear();
    canonicalKeys.add(v);
    return true;
  }
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
  // A pair passed before is a library job id of a library key: nothing to check again.
  if (operationKey !== undefined && jobKeys.get(v) === operationKey) return true;
  if (!LIBRARY_JOB_ID.test(v)) return isIdentifier(v, 255);
  if (operationKey === undefined || !isLibraryKey(operationKey, true)) return false;
  if (v !== jobIdOfKey(operationKey)) return false;
  if (jobKeys.size >= MAX_JOB_KEYS) jobKeys.clear();
  jobKeys.set(v, operationKey);
  return true;
}
