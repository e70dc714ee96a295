import { createCipheriv, createDecipheriv, createHmac, createSecretKey, hkdfSync, type KeyObject } from 'node:crypto';
import { deserialize, serialize } from 'node:v8';
import { IdempotencyConfigError, SealError, SerializationError } from '../errors/errors.js';
import { ERROR_CODES } from '../errors/idempotency-error.js';
import { nextIv } from './iv-pool.js';
import { weakSecretReason } from './key-strength.js';

/** A key as configured: an id recorded with everything it seals or keys, and at least 32 bytes of secret. */
export type KeyringKey = {
  /** 1–32 of `A–Z a–z 0–9 _ -`; stored beside every sealed value, keyed fingerprint and ref. */
  id: string;
  /**
   * The secret: bytes, or a string — `base64:…` or `hex:…` for encoded bytes, anything else is
   * taken as its UTF-8 bytes. Weak secrets are refused (see {@link defineKeyring}).
   */
  secret: string | Uint8Array;
};

export type KeyringOptions = {
  /** Every key that may open what was sealed; order does not matter. */
  keys: readonly KeyringKey[];
  /** The id of the key that seals and keys new values. @defaultValue the first key's id */
  current?: string;
};

/** What a key is used for; each use gets its own subkey, so one use never reveals another. */
export type SealPurpose = 'result' | 'error' | 'input' | 'value';

/** A sealed value as stored: `bqs1.<keyId>.<base64url of iv, ciphertext and tag>`. The type remembers what it holds. */
export type Sealed<T = unknown> = string & { readonly __sealed?: T };

export const SEALED_PREFIX = 'bqs1.';
const KEY_ID = /^[A-Za-z0-9_-]{1,32}$/;
const SALT = 'bullmq-idempotency/keyring/v1';
const IV_BYTES = 12;
const TAG_BYTES = 16;

type Subkeys = { seal: KeyObject; fingerprint: KeyObject; refs: Buffer };

/**
 * The application's keys: AES-256-GCM for what is sealed (results, error text, declared input),
 * HMAC-SHA-256 for keyed fingerprints and identifier refs. One key is current and seals; every
 * key opens, so a rotation needs no downtime: deploy `[k2 (current), k1]`, then drop k1 once no
 * record sealed with it is within retention.
 *
 * Each key's secret is expanded with HKDF into one subkey per use. Key material lives in
 * KeyObjects in private fields: logging, inspecting or serialising a keyring shows ids only.
 */
export class Keyring {
  readonly currentId: string;
  readonly ids: readonly string[];
  readonly #keys: Map<string, Subkeys>;

  constructor(options: KeyringOptions) {
    const keys = options.keys;
    if (!Array.isArray(keys) || keys.length === 0) {
      throw new IdempotencyConfigError('A keyring needs at least one key', { option: 'keyring.keys' });
    }
    this.#keys = new Map();
    for (const [i, k] of keys.entries()) {
      if (typeof k?.id !== 'string' || !KEY_ID.test(k.id)) {
        throw new IdempotencyConfigError(`keyring.keys[${i}].id must be 1–32 of A–Z a–z 0–9 _ -`, {
          option: 'keyring.keys',
        });
      }
      if (this.#keys.has(k.id)) {
        throw new IdempotencyConfigError(`keyring key id ${k.id} is listed twice`, { option: 'keyring.keys' });
      }
      const secret = secretBytes(k.secret, k.id);
      const weak = weakSecretReason(secret);
      if (weak) {
        throw new IdempotencyConfigError(`keyring key ${k.id} is too weak: its secret ${weak}`, {
          option: 'keyring.keys',
          keyId: k.id,
        });
      }
      this.#keys.set(k.id, {
        seal: createSecretKey(derive(secret, 'seal')),
        fingerprint: createSecretKey(derive(secret, 'fingerprint')),
        refs: derive(secret, 'refs'),
      });
    }
    const current = options.current ?? keys[0]?.id;
    if (current === undefined || !this.#keys.has(current)) {
      throw new IdempotencyConfigError(`keyring.current ${current} is not one of the keys`, {
        option: 'keyring.current',
      });
    }
    this.currentId = current;
    this.ids = Object.freeze([current, ...[...this.#keys.keys()].filter((id) => id !== current)]);
  }

  /** True when the keyring holds the key `id`. */
  has(id: string): boolean {
    return this.#keys.has(id);
  }

  /**
   * Seals any value the structured clone algorithm can copy (plain data, Buffers and typed
   * arrays, Dates, Maps, Sets, BigInts, `undefined`), so {@link Keyring.open} gives back exactly
   * that value. Throws {@link SerializationError} for what cannot be copied (functions, symbols).
   */
  seal<T>(value: T, purpose: SealPurpose): Sealed<T> {
    let bytes: Buffer;
    try {
      bytes = serialize(value);
    } catch (err) {
      throw new SerializationError({ path: '$', reason: `cannot be sealed (${(err as Error).name})` });
    }
    return this.sealBytes(bytes, purpose) as Sealed<T>;
  }

  /** Opens what {@link Keyring.seal} made for `purpose`; throws {@link SealError}, never returns garbage. */
  open<T>(sealed: Sealed<T> | string, purpose: SealPurpose): T {
    const bytes = this.openBytes(sealed, purpose);
    try {
      return deserialize(bytes) as T;
    } catch {
      throw new SealError(ERROR_CODES.sealInvalid, { keyId: sealedKeyId(sealed) ?? null, purpose });
    }
  }

  /** Seals raw bytes (AES-256-GCM, a fresh 96-bit IV, the purpose as associated data). */
  sealBytes(plain: Uint8Array, purpose: SealPurpose): string {
    const keys = this.#keys.get(this.currentId) as Subkeys;
    const iv = nextIv();
    const cipher = createCipheriv('aes-256-gcm', keys.seal, iv);
    cipher.setAAD(Buffer.from(purpose));
    const head = cipher.update(plain);
    const tail = cipher.final();
    const out = Buffer.concat([iv, head, tail, cipher.getAuthTag()]);
    return `${SEALED_PREFIX}${this.currentId}.${out.toString('base64url')}`;
  }

  /** Opens what {@link Keyring.sealBytes} made. */
  openBytes(sealed: string, purpose: SealPurpose): Buffer {
    const keyId = sealedKeyId(sealed);
    if (keyId === undefined) throw new SealError(ERROR_CODES.sealInvalid, { keyId: null, purpose });
    const keys = this.#keys.get(keyId);
    if (!keys) throw new SealError(ERROR_CODES.sealKeyUnknown, { keyId, purpose });
    const raw = Buffer.from(sealed.slice(SEALED_PREFIX.length + keyId.length + 1), 'base64url');
    if (raw.length < IV_BYTES + TAG_BYTES) throw new SealError(ERROR_CODES.sealInvalid, { keyId, purpose });
    try {
      const decipher = createDecipheriv('aes-256-gcm', keys.seal, raw.subarray(0, IV_BYTES));
      decipher.setAAD(Buffer.from(purpose));
      decipher.setAuthTag(raw.subarray(raw.length - TAG_BYTES));
      return Buffer.concat([decipher.update(raw.subarray(IV_BYTES, raw.length - TAG_BYTES)), decipher.final()]);
    } catch {
      throw new SealError(ERROR_CODES.sealInvalid, { keyId, purpose });
    }
  }

  /** base64url HMAC-SHA-256 of `data` under the fingerprint subkey of `keyId` (the current key by default). */
  fingerprintMac(data: string, keyId = this.currentId): string {
    const keys = this.#keys.get(keyId);
    if (!keys) throw new SealError(ERROR_CODES.sealKeyUnknown, { keyId, purpose: 'fingerprint' });
    return createHmac('sha256', keys.fingerprint).update(data).digest('base64url');
  }

  /**
   * The HMAC keys for identifier refs, current first, each under its keyring id: pass them as
   * `hmacKeys` of `defineRedactionPolicy` (or pass the keyring as `keyring`).
   */
  refKeys(): { id: string; secret: Uint8Array<ArrayBuffer> }[] {
    return this.ids.map((id) => ({ id, secret: new Uint8Array((this.#keys.get(id) as Subkeys).refs) }));
  }

  /** Ids only: a keyring never serialises its keys. */
  toJSON(): { currentId: string; ids: readonly string[] } {
    return { currentId: this.currentId, ids: this.ids };
  }
}

/**
 * Validates and builds a keyring. Throws {@link IdempotencyConfigError} (`IDEMPOTENCY_CONFIG`) for
 * no keys, a malformed or repeated id, an unknown `current`, or a weak secret: under 32 bytes, few
 * distinct bytes, a repeated block or a constant step.
 *
 * @example
 * const keyring = defineKeyring({
 *   keys: [
 *     { id: 'k2', secret: process.env.BQI_KEY_K2! },   // e.g. 'base64:…' of 32 random bytes
 *     { id: 'k1', secret: process.env.BQI_KEY_K1! },   // rotated out: still opens old records
 *   ],
 * });
 */
export function defineKeyring(options: KeyringOptions): Keyring {
  return new Keyring(options);
}

/**
 * Builds a keyring from keys fetched at start-up, for instance from a KMS or a secret manager.
 * The source may give the keys, or one spec string in the form of {@link parseKeyringSpec}.
 *
 * @example
 * const keyring = await loadKeyring(async () => ({ keys: await secrets.getKeys('bqi') }));
 * const fromSpec = await loadKeyring(() => secrets.getString('BQI_KEYRING'));
 */
export async function loadKeyring(
  source: () => KeyringOptions | string | Promise<KeyringOptions | string>,
): Promise<Keyring> {
  const loaded = await source();
  return typeof loaded === 'string' ? parseKeyringSpec(loaded) : new Keyring(loaded);
}

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

/**
 * Parses a keyring from one configuration string, `id:secret` pairs separated by commas, the
 * current key first: `k2:base64:…,k1:base64:…` (a secret is `base64:…`, `hex:…`, or its UTF-8
 * text). The one parser of keyring specs: `BQI_KEYRING`, the CLI and the operations process read
 * theirs with it. Throws {@link IdempotencyConfigError} (`IDEMPOTENCY_CONFIG`, `details.problem`
 * naming the problem) for an empty spec, an entry that is not `id:secret`, an entry without an
 * id (`base64:…`), a malformed or repeated id, an empty secret, a secret that is not valid
 * base64 or hex, or a weak one. Messages name entries and key ids, never secrets.
 *
 * @example
 * const keyring = parseKeyringSpec(process.env.BQI_KEYRING ?? '');
 */
export function parseKeyringSpec(spec: string): Keyring {
  const parts = spec
    .split(',')
    .map((part) => part.trim())
    .filter((part) => part.length > 0);
  if (parts.length === 0) throw specError('empty', `is empty (expected ${KEYRING_SPEC_FORM})`);
  const keys: { id: string; secret: Uint8Array }[] = [];
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
    const secret = decodeSecret(part.slice(colon + 1).trim(), id);
    const weak = weakSecretReason(secret);
    if (weak) throw specError('too_weak', `key ${id} is too weak: its secret ${weak}`, id);
    keys.push({ id, secret });
  }
  return new Keyring({ keys });
}

/** The id of the key a sealed string names, or undefined when it is not a sealed string. */
export function sealedKeyId(value: string): string | undefined {
  if (typeof value !== 'string' || !value.startsWith(SEALED_PREFIX)) return undefined;
  const dot = value.indexOf('.', SEALED_PREFIX.length);
  if (dot < 0) return undefined;
  const id = value.slice(SEALED_PREFIX.length, dot);
  return KEY_ID.test(id) ? id : undefined;
}

/** True for a string of the sealed form (it may still fail to open). */
export function isSealed(value: unknown): value is Sealed {
  return typeof value === 'string' && sealedKeyId(value) !== undefined;
}

function secretBytes(secret: string | Uint8Array, keyId: string): Uint8Array {
  if (secret instanceof Uint8Array) return secret;
  if (typeof secret !== 'string') {
    throw new IdempotencyConfigError(`keyring key ${keyId}: secret must be a string or bytes`, {
      option: 'keyring.keys',
    });
  }
  return decodeSecret(secret, keyId);
}

/** base64 of either alphabet (Node's decoder reads both), padded or not. */
const BASE64 = /^([A-Za-z0-9+/_-]+)(={0,2})$/;

/**
 * The bytes of a secret as written: `base64:…` (standard or URL alphabet), `hex:…`, or its
 * UTF-8 text. Malformed encodings are refused by name: Node's decoders skip what they cannot
 * read, so a typo would otherwise surface as a short (weak) secret.
 */
function decodeSecret(text: string, keyId: string): Uint8Array {
  const encoded = /^(base64|hex):/i.exec(text);
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

function derive(secret: Uint8Array, use: 'seal' | 'fingerprint' | 'refs'): Buffer {
  return Buffer.from(hkdfSync('sha256', secret, SALT, use, 32));
}
