import { wordLooksRandom } from './random-word.js';

/** A code or class name: letters, digits and `_ . : -`, starting with a letter; 1–64 characters. */
const NAME_GRAMMAR = /^[A-Za-z][A-Za-z0-9_.:-]{0,63}$/;
const SEGMENT = /[_.:-]/;
/** More digits than this in a name make it data (a UUID has about 20, a card 16, `ERR_HTTP2_STREAM_ERROR` 1). */
const MAX_DIGITS = 8;
/** A Postgres SQLSTATE (`57P01`, `23505`): five digits or capitals, often starting with a digit. */
const SQLSTATE = /^[0-9A-Z]{5}$/;
/** From this length a part is checked for randomness (`AiZDWmzLpWAdqLMQAbuu` has no digit to give it away). */
const RANDOM_CHECK_MIN = 16;
/** Letters of one case in a run this long, with no word break, are a token (`AKIAQWERTYZXCVBNMASD`). */
const SINGLE_CASE_MAX = 16;

/**
 * True when `value` may stay in clear as an error code, a class name or a field name in an
 * error: it matches the grammar and no part of it looks like a token: a run over 12 characters
 * that mixes letters and digits; one of 16 or more whose letters look drawn at random (case
 * changing as often as in random text, not once per word as in CamelCase: the audit trail's
 * test, so `AWSServiceException` is refused too); over 16 letters of one case; any run over 32.
 * `ECONNREFUSED`, `ERR_HTTP_HEADERS_SENT`, `P2002`, `card-declined`, `amount`,
 * `maxRetriesPerRequest`, `StripeCardError` pass; `sk_live_4eC39HqLyjWDarjtT1zdp7dc` and `sk_live_` with 24 random
 * letters and no digit (`ydwVfjyHwBagfBYpsbwgwhOS`) do not. A grammar, not a list of secret
 * formats: what it does not accept is never shown. More than eight digits in all make it data
 * too, however it is cut (`HRKU-34e49671-f9f7-…`, `tel-07911-123456`).
 */
export function isCleanName(value: string): boolean {
  if (!NAME_GRAMMAR.test(value)) return false;
  // Short parts can still make a token between them (`HRKU-<uuid>`, an id with dashes): names carry few digits.
  if ((value.match(/[0-9]/g)?.length ?? 0) > MAX_DIGITS) return false;
  for (const part of value.split(SEGMENT)) {
    if (part.length > 32) return false;
    if (part.length > 12 && /[0-9]/.test(part) && /[A-Za-z]/.test(part)) return false;
    if (part.length >= RANDOM_CHECK_MIN && wordLooksRandom(part)) return false;
    if (part.length > SINGLE_CASE_MAX && (part === part.toUpperCase() || part === part.toLowerCase())) return false;
  }
  return true;
}

/**
 * A data path (`items[0].amount`, `$.a[2].b`) with every segment that is not a clean name or an
 * index shown as `…`. Only `[n]` is an index: a key made of digits (`cards.4111111111111111`) is a
 * key, and may be a card or a national number.
 */
export function cleanPath(path: string): string {
  if (path === '' || path === '$') return path || '(root)';
  return path
    .split(/(\[\d+\]|\.)/)
    .map((part) =>
      part === '.' || part === '' || part === '$' || /^\[\d+\]$/.test(part) || isCleanName(part) ? part : '…',
    )
    .join('');
}

/**
 * An error as a log line may name it: its code (a SQLSTATE, `ECONNREFUSED`) when clean, else its
 * class name, never its message (Postgres and zod quote the values they refuse).
 */
export function errorLabel(err: unknown): string {
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && (isCleanName(code) || isSqlState(code))) return code;
  const name = (err as { name?: unknown } | null)?.name;
  return typeof name === 'string' && isCleanName(name) ? name : 'Error';
}

/** True for a Postgres SQLSTATE (`57P01`, `23505`). */
export function isSqlState(code: string): boolean {
  return SQLSTATE.test(code);
}
