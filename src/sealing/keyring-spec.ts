import { IdempotencyConfigError } from '../errors/errors.js';
import { weakSecretReason } from './key-strength.js';
import { KEY_ID } from './sealed-text.js';

/**
 * Keys as configuration writes them: the keyring spec (`k2:base64:…,k1:base64:…`) and a secret's
 * text (`base64:…`, `hex:…`, or UTF-8). Apart from the keyring's cryptography because it is
 * about text an operator types: each mistake is refused by name (`details.problem`), and no
 * message ever quotes a secret.
 */

/** The form of a keyring spec, named by every message about one. */
export const KEYRING_SPEC_FORM = 'id:base64:…, comma-separated, the current key first';

/** What is wrong with a keyring spec: one stable name per problem, in `details.problem`. */
export type KeyringSpecProblem =
  | 'empty'
  | 'not_a_pair'
  | 'no_key_id'
  | 'bad_key_id'
  | 'duplicate_key_id'
  | 'empty_secret'
  | 'not_base64'
  | 'not_hex'
  | 'too_weak';

/** Ids a spec entry may not have: `base64:…` alone would parse as a key named `base64`. */
const ENCODING_IDS = new Set(['base64', 'hex']);

function specError(problem: KeyringSpecProblem, message: string, keyId?: string): IdempotencyConfigError {
  return new IdempotencyConfigError(message, { option: 'keyring', problem, ...(keyId ? { keyId } : {}) });
}

/** A key of a spec, its secret decoded (and checked for strength). */
export type KeyringKeyBytes = { id: string; secret: Uint8Array };

/**
 * The keys of a keyring spec, in order, the current key first: what {@link parseKeyringSpec}
 * (keyring.ts) builds a keyring from. Throws as it documents.
 */
export function readKeyringSpec(spec: string): KeyringKeyBytes[] {
  const parts = spec
    .split(',')
    .map((part) => part.trim())
    .filter((part) => part.length > 0);
  if (parts.length === 0) throw specError('empty', `is empty (expected ${KEYRING_SPEC_FORM})`);
  const keys: KeyringKeyBytes[] = [];
  const entryOf = new Map<string, number>();
  for (const [i, part] of parts.entries()) {
    const entry = `entry ${i + 1}`;
    const colon = part.indexOf(':');
    if (colon < 0) throw specError('not_a_pair', `${entry} is not id:secret (expected ${KEYRING_SPEC_FORM})`);
    const id = part.slice(0, colon).trim();
    if (id.length === 0 || ENCODING_IDS.has(id.toLowerCase())) {
      throw specError('no_key_id', `${entry} has no key id: the form is ${KEYRING_SPEC_FORM}`);
    }
    // An id that is not one may be a secret pasted on its own: it is not quoted.
    if (!KEY_ID.test(id)) throw specError('bad_key_id', `${entry}: a key id is 1–32 of A–Z a–z 0–9 _ -`);
    const first = entryOf.get(id);
    if (first !== undefined) {
      throw specError('duplicate_key_id', `key id ${id} is listed twice (entries ${first} and ${i + 1})`, id);
    }
    entryOf.set(id, i + 1);
    const text = part.slice(colon + 1).trim();
    const secret = decodeSecret(text, id);
    const weak = weakSecretReason(secret, !ENCODED.test(text));
    if (weak) throw specError('too_weak', `key ${id} is too weak: its secret ${weak}`, id);
    keys.push({ id, secret });
  }
  return keys;
}

export function secretBytes(secret: string | Uint8Array, keyId: string): Uint8Array {
  if (secret instanceof Uint8Array) return secret;
  if (typeof secret !== 'string') {
    throw new IdempotencyConfigError(`keyring key ${keyId}: secret must be a string or bytes`, {
      option: 'keyring.keys',
    });
  }
  return decodeSecret(secret, keyId);
}

/** A secret written as encoded bytes rather than text. */
export const ENCODED = /^(base64|hex):/i;

/** base64 of either alphabet (Node's decoder reads both), padded or not. */
const BASE64 = /^([A-Za-z0-9+/_-]+)(={0,2})$/;

/**
 * The bytes of a secret as written: `base64:…` (standard or URL alphabet), `hex:…`, or its
 * UTF-8 text. Malformed encodings are refused by name: Node's decoders skip what they cannot
 * read, so a typo would otherwise surface as a short (weak) secret.
 */
function decodeSecret(text: string, keyId: string): Uint8Array {
  const encoded = ENCODED.exec(text);
  const body = encoded ? text.slice(encoded[0].length).trim() : text;
  if (body.length === 0) throw specError('empty_secret', `key ${keyId} has an empty secret`, keyId);
  if (!encoded) return Buffer.from(body, 'utf8');
  if ((encoded[1] as string).toLowerCase() === 'hex') {
    if (!/^(?:[0-9a-fA-F]{2})+$/.test(body)) {
      throw specError(
        'not_hex',
        `key ${keyId}: its secret is not valid hex (hex:… of an even number of 0-9 a-f)`,
        keyId,
      );
    }
    return Buffer.from(body, 'hex');
  }
  const b64 = BASE64.exec(body);
  const chars = b64?.[1]?.length ?? 0;
  const padding = b64?.[2]?.length ?? 0;
  if (!b64 || chars % 4 === 1 || (padding > 0 && (chars + padding) % 4 !== 0)) {
    throw specError('not_base64', `key ${keyId}: its secret is not valid base64`, keyId);
  }
  return Buffer.from(body, 'base64');
}
