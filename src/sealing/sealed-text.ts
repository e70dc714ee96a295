import { IdempotencyConfigError, SealError } from '../errors/errors.js';
import { ERROR_CODES } from '../errors/idempotency-error.js';

/**
 * The text of a sealed value: its form (`bqs2.<keyId>.<place>.<sealed bytes>`), the place it is
 * bound to, and what can be read of it without a key (its key id, its place, its size). Apart
 * from the keyring because every reader of stored values (the CLI, the console, sealed results
 * and errors) tells sealed text by its form and never needs the keys to do so.
 */

/** What a key is used for; each use gets its own subkey, so one use never reveals another. */
export type SealPurpose = 'result' | 'error' | 'input' | 'value';

/**
 * Where a sealed value belongs: what it is, the operation (as the ledger names its rows: a step's
 * is `operation#step`), the field (an input field, a confirmation) and the bounded operation
 * key. Sealed as AES-GCM associated data and carried in clear in the sealed text: a value
 * opens only where it was sealed.
 */
export type SealPlace = {
  purpose: SealPurpose;
  operation: string;
  /** An input field's name, `confirm:<name>`; empty for a whole result or error. */
  field?: string;
  /** The bounded operation key; empty only for an error handed to BullMQ before the key was known. */
  key: string;
};

/**
 * A sealed value as stored: `bqs2.<keyId>.<place>.<sealed bytes>`, the place and the bytes (IV,
 * ciphertext, tag) in unpadded base64url. The type remembers what it holds.
 */
export type Sealed<T = unknown> = string & { readonly __sealed?: T };

/** The prefix of sealed text bound to its place. */
export const SEALED_PREFIX = 'bqs2.';
/** The prefix of sealed text made before seals were bound to their place: recognised, never opened. */
export const UNBOUND_SEALED_PREFIX = 'bqs1.';
/** A key id: recorded with everything a key seals or keys, so only a short plain form. */
export const KEY_ID = /^[A-Za-z0-9_-]{1,32}$/;
const BASE64URL = /^[A-Za-z0-9_-]+$/;
const PURPOSES: ReadonlySet<string> = new Set<SealPurpose>(['result', 'error', 'input', 'value']);
/** AES-GCM's IV, drawn for each seal, and its authentication tag: both in the sealed bytes. */
export const IV_BYTES = 12;
export const TAG_BYTES = 16;

/** A sealed text read (not yet authenticated). */
export type ParsedSealed = { keyId: string; placeText: string; place: SealPlace; body: Buffer };

/** The id of the key a sealed string names (bound or unbound), or undefined when it is not a sealed string. */
export function sealedKeyId(value: string): string | undefined {
  if (typeof value !== 'string') return undefined;
  const prefix = value.startsWith(SEALED_PREFIX)
    ? SEALED_PREFIX
    : value.startsWith(UNBOUND_SEALED_PREFIX)
      ? UNBOUND_SEALED_PREFIX
      : undefined;
  if (!prefix) return undefined;
  const dot = value.indexOf('.', prefix.length);
  if (dot < 0) return undefined;
  const id = value.slice(prefix.length, dot);
  return KEY_ID.test(id) ? id : undefined;
}

/** True for a string of the sealed form, bound or unbound (it may still fail to open). */
export function isSealed(value: unknown): value is Sealed {
  return typeof value === 'string' && sealedKeyId(value) !== undefined;
}

/** The place a sealed string names, unauthenticated (opening authenticates it), or undefined. */
export function sealedPlace(value: string): SealPlace | undefined {
  try {
    return parseSealed(value, 'value').place;
  } catch {
    return undefined;
  }
}

/** Bytes of ciphertext a sealed string holds (its sealed bytes less IV and tag), or undefined. */
export function sealedSize(value: string): number | undefined {
  if (!isSealed(value)) return undefined;
  const body = value.slice(value.lastIndexOf('.') + 1);
  return Math.max(0, Buffer.byteLength(body, 'base64url') - IV_BYTES - TAG_BYTES);
}

/** The place as sealed text carries it: base64url of the JSON array `[purpose, operation, field, key]`. */
export function encodePlace(place: SealPlace): string {
  if (!PURPOSES.has(place.purpose) || typeof place.operation !== 'string' || typeof place.key !== 'string') {
    throw new IdempotencyConfigError('a seal needs its place: purpose, operation and key', { option: 'place' });
  }
  return Buffer.from(JSON.stringify([place.purpose, place.operation, place.field ?? '', place.key])).toString(
    'base64url',
  );
}

const B64URL_ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';

/**
 * Strict unpadded base64url: exactly the text Node would write for the bytes, so one text per
 * value. Told without encoding the bytes again: the alphabet, a length that is not 1 mod 4, and
 * no stray bits in the last character (its low 4 bits zero after 2 characters of a group, its
 * low 2 bits after 3).
 */
function decodeBase64url(text: string): Buffer | undefined {
  if (!BASE64URL.test(text)) return undefined;
  const tail = text.length % 4;
  if (tail === 1) return undefined;
  if (tail > 1) {
    const last = B64URL_ALPHABET.indexOf(text[text.length - 1] as string);
    if (last % (tail === 2 ? 16 : 4) !== 0) return undefined;
  }
  return Buffer.from(text, 'base64url');
}

/**
 * Reads a sealed string, refusing all but its one canonical text: the prefix, a key id, the
 * place and the sealed bytes, each strict base64url (no padding, whitespace or junk, no stray
 * bits), the bytes at least an IV and a tag long. Unbound (`bqs1.`) text is refused by name.
 */
export function parseSealed(sealed: string, purpose: SealPurpose): ParsedSealed {
  const keyId = sealedKeyId(sealed);
  if (keyId === undefined) throw new SealError(ERROR_CODES.sealInvalid, { keyId: null, purpose });
  if (!sealed.startsWith(SEALED_PREFIX)) throw new SealError(ERROR_CODES.sealUnbound, { keyId, purpose });
  const parts = sealed.slice(SEALED_PREFIX.length + keyId.length + 1).split('.');
  const placeBytes = parts.length === 2 ? decodeBase64url(parts[0] as string) : undefined;
  const body = parts.length === 2 ? decodeBase64url(parts[1] as string) : undefined;
  const place = placeBytes && decodePlace(placeBytes);
  if (!place || !body || body.length < IV_BYTES + TAG_BYTES) {
    throw new SealError(ERROR_CODES.sealInvalid, { keyId, purpose });
  }
  return { keyId, placeText: parts[0] as string, place, body };
}

function decodePlace(bytes: Buffer): SealPlace | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(bytes.toString('utf8'));
  } catch {
    return undefined;
  }
  if (!Array.isArray(parsed) || parsed.length !== 4 || !parsed.every((p) => typeof p === 'string')) return undefined;
  const [purpose, operation, field, key] = parsed as string[];
  if (!PURPOSES.has(purpose as string)) return undefined;
  return {
    purpose: purpose as SealPurpose,
    operation: operation as string,
    field: field as string,
    key: key as string,
  };
}

/** The parts of a place that differ from the expected one (never their values). */
export function placeMismatch(found: SealPlace, expected: Partial<SealPlace>): (keyof SealPlace)[] {
  const out: (keyof SealPlace)[] = [];
  if (expected.purpose !== undefined && found.purpose !== expected.purpose) out.push('purpose');
  if (expected.operation !== undefined && found.operation !== expected.operation) out.push('operation');
  if (expected.field !== undefined && (found.field ?? '') !== expected.field) out.push('field');
  if (expected.key !== undefined && found.key !== expected.key) out.push('key');
  return out;
}

/**
 * Refuses a seal found at another place than `expected` (`IDEMPOTENCY_SEAL_MISPLACED`, naming the
 * parts that differ). `keyId` is the sealed text's key id, or a function giving it: it is only
 * needed for the error.
 */
export function assertPlace(found: SealPlace, expected: SealPlace, keyId: string | null | (() => string | null)): void {
  // Every seal that opens is checked here: the same place passes without building anything.
  if (
    found.key === expected.key &&
    found.operation === expected.operation &&
    found.purpose === expected.purpose &&
    (found.field ?? '') === (expected.field ?? '')
  ) {
    return;
  }
  const mismatch = placeMismatch(found, { ...expected, field: expected.field ?? '' });
  if (mismatch.length > 0)
    throw new SealError(ERROR_CODES.sealMisplaced, {
      keyId: typeof keyId === 'function' ? keyId() : keyId,
      purpose: expected.purpose,
      mismatch,
    });
}
