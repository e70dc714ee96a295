import {
  createCipheriv,
  createDecipheriv,
  createHmac,
  createSecretKey,
  hkdfSync,
  type KeyObject,
  randomBytes,
} from 'node:crypto';
import { deserialize, serialize } from 'node:v8';
import { IdempotencyConfigError, SealError, SerializationError } from '../errors/errors.js';
import { ERROR_CODES } from '../errors/idempotency-error.js';
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
  /**
   * Seals one process makes under one key before it warns once (`IDEMPOTENCY_SEAL_BUDGET`,
   * through `process.emitWarning`) that the key nears its budget: 2^32 seals per key, counted
   * across the whole fleet, for AES-GCM with random 96-bit IVs (NIST SP 800-38D, 8.3). Set it to
   * 2^32 divided by the number of processes that seal with the key over its life; see
   * docs/sealing-keys.md. @defaultValue 2^28 (a sixteenth of the budget)
   */
  sealWarnAt?: number;
};

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
const KEY_ID = /^[A-Za-z0-9_-]{1,32}$/;
const BASE64URL = /^[A-Za-z0-9_-]+$/;
const PURPOSES: ReadonlySet<string> = new Set<SealPurpose>(['result', 'error', 'input', 'value']);
const SALT = 'bullmq-idempotency/keyring/v1';
const IV_BYTES = 12;
const TAG_BYTES = 16;
/** Seals per key with random 96-bit IVs before the chance of a repeated IV passes 2^-32 (NIST SP 800-38D). */
export const SEALS_PER_KEY_BUDGET = 2 ** 32;
const DEFAULT_SEAL_WARN_AT = 2 ** 28;

/** A sealed text read (not yet authenticated). */
type ParsedSealed = { keyId: string; placeText: string; place: SealPlace; body: Buffer };

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
  readonly #sealCounts = new Map<string, number>();
  readonly #warnAt: number;

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
      const weak = weakSecretReason(secret, typeof k.secret === 'string' && !ENCODED.test(k.secret));
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
    const warnAt = options.sealWarnAt ?? DEFAULT_SEAL_WARN_AT;
    if (!Number.isSafeInteger(warnAt) || warnAt < 1) {
      throw new IdempotencyConfigError('keyring.sealWarnAt must be a positive integer', {
        option: 'keyring.sealWarnAt',
      });
    }
    this.#warnAt = warnAt;
    this.currentId = current;
    this.ids = Object.freeze([current, ...[...this.#keys.keys()].filter((id) => id !== current)]);
  }

  /** True when the keyring holds the key `id`. */
  has(id: string): boolean {
    return this.#keys.has(id);
  }

  /**
   * Seals any value the structured clone algorithm can copy (plain data, Buffers and typed
   * arrays, Dates, Maps, Sets, BigInts, `undefined`) for one place, so {@link Keyring.open} at
   * that place gives back exactly that value and at any other throws. Throws
   * {@link SerializationError} for what cannot be copied (functions, symbols).
   */
  seal<T>(value: T, place: SealPlace): Sealed<T> {
    let bytes: Buffer;
    try {
      bytes = serialize(value);
    } catch (err) {
      throw new SerializationError({ path: '$', reason: `cannot be sealed (${(err as Error).name})` });
    }
    return this.sealBytes(bytes, place) as Sealed<T>;
  }

  /**
   * Opens what {@link Keyring.seal} made for `place`; throws {@link SealError}, never returns
   * garbage: `IDEMPOTENCY_SEAL_MISPLACED` when it was sealed for another place,
   * `IDEMPOTENCY_SEAL_UNBOUND` when it was sealed before seals named their place.
   */
  open<T>(sealed: Sealed<T> | string, place: SealPlace): T {
    const opened = this.openPlaced<T>(sealed, place.purpose);
    assertPlace(opened.place, place, sealedKeyId(sealed) ?? null);
    return opened.value;
  }

  /**
   * Opens a sealed value wherever it was sealed for `purpose`, and says where that was (the place
   * is authenticated: it is the associated data). For callers that check the place themselves.
   */
  openPlaced<T>(sealed: Sealed<T> | string, purpose: SealPurpose): { value: T; place: SealPlace } {
    const { bytes, place } = this.openBytesPlaced(sealed, purpose);
    try {
      return { value: deserialize(bytes) as T, place };
    } catch {
      throw new SealError(ERROR_CODES.sealInvalid, { keyId: sealedKeyId(sealed) ?? null, purpose });
    }
  }

  /**
   * Seals raw bytes: AES-256-GCM under the current key, an IV drawn from the CSPRNG for this
   * seal alone (never pre-drawn: a pool in memory is copied by forks, clones and startup
   * snapshots), the key id and the place as associated data.
   */
  sealBytes(plain: Uint8Array, place: SealPlace): string {
    const keyId = this.currentId;
    const keys = this.#keys.get(keyId) as Subkeys;
    const placeText = encodePlace(place);
    const head = `${SEALED_PREFIX}${keyId}.${placeText}`;
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', keys.seal, iv);
    cipher.setAAD(Buffer.from(head));
    const out = Buffer.concat([iv, cipher.update(plain), cipher.final(), cipher.getAuthTag()]);
    this.#counted(keyId);
    return `${head}.${out.toString('base64url')}`;
  }

  /** Opens what {@link Keyring.sealBytes} made for `place`. */
  openBytes(sealed: string, place: SealPlace): Buffer {
    const opened = this.openBytesPlaced(sealed, place.purpose);
    assertPlace(opened.place, place, sealedKeyId(sealed) ?? null);
    return opened.bytes;
  }

  /** Opens what {@link Keyring.sealBytes} made for `purpose`, wherever, and its place. */
  openBytesPlaced(sealed: string, purpose: SealPurpose): { bytes: Buffer; place: SealPlace } {
    const parsed = parseSealed(sealed, purpose);
    const keys = this.#keys.get(parsed.keyId);
    if (!keys) throw new SealError(ERROR_CODES.sealKeyUnknown, { keyId: parsed.keyId, purpose });
    const raw = parsed.body;
    let bytes: Buffer;
    try {
      const decipher = createDecipheriv('aes-256-gcm', keys.seal, raw.subarray(0, IV_BYTES));
      decipher.setAAD(Buffer.from(`${SEALED_PREFIX}${parsed.keyId}.${parsed.placeText}`));
      decipher.setAuthTag(raw.subarray(raw.length - TAG_BYTES));
      bytes = Buffer.concat([decipher.update(raw.subarray(IV_BYTES, raw.length - TAG_BYTES)), decipher.final()]);
    } catch {
      throw new SealError(ERROR_CODES.sealInvalid, { keyId: parsed.keyId, purpose });
    }
    if (parsed.place.purpose !== purpose) {
      throw new SealError(ERROR_CODES.sealMisplaced, { keyId: parsed.keyId, purpose, mismatch: ['purpose'] });
    }
    return { bytes, place: parsed.place };
  }

  /**
   * Seals this process has made under `keyId` (the current key by default) since the keyring was
   * built. The budget is 2^32 per key across every process; see {@link KeyringOptions.sealWarnAt}.
   */
  sealCount(keyId = this.currentId): number {
    return this.#sealCounts.get(keyId) ?? 0;
  }

  #counted(keyId: string): void {
    const n = (this.#sealCounts.get(keyId) ?? 0) + 1;
    this.#sealCounts.set(keyId, n);
    if (n === this.#warnAt) {
      process.emitWarning(
        `keyring key ${keyId} has sealed ${n} values in this process; a key's budget is 2^32 seals ` +
          'across every process that seals with it: add a new current key (see docs/sealing-keys.md)',
        { code: ERROR_CODES.sealBudget, detail: `sealWarnAt ${this.#warnAt}` },
      );
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
    const text = part.slice(colon + 1).trim();
    const secret = decodeSecret(text, id);
    const weak = weakSecretReason(secret, !ENCODED.test(text));
    if (weak) throw specError('too_weak', `key ${id} is too weak: its secret ${weak}`, id);
    keys.push({ id, secret });
  }
  return new Keyring({ keys });
}

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
function encodePlace(place: SealPlace): string {
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
function parseSealed(sealed: string, purpose: SealPurpose): ParsedSealed {
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

function assertPlace(found: SealPlace, expected: SealPlace, keyId: string | null): void {
  const mismatch = placeMismatch(found, { ...expected, field: expected.field ?? '' });
  if (mismatch.length > 0)
    throw new SealError(ERROR_CODES.sealMisplaced, { keyId, purpose: expected.purpose, mismatch });
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

/** A secret written as encoded bytes rather than text. */
const ENCODED = /^(base64|hex):/i;

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

function derive(secret: Uint8Array, use: 'seal' | 'fingerprint' | 'refs'): Buffer {
  return Buffer.from(hkdfSync('sha256', secret, SALT, use, 32));
}
