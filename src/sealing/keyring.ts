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
import { ENCODED, readKeyringSpec, secretBytes } from './keyring-spec.js';
import {
  assertPlace,
  encodePlace,
  IV_BYTES,
  KEY_ID,
  parseSealed,
  SEALED_PREFIX,
  type Sealed,
  type SealPlace,
  type SealPurpose,
  sealedKeyId,
  TAG_BYTES,
} from './sealed-text.js';

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

const SALT = 'bullmq-idempotency/keyring/v1';
/** Seals per key with random 96-bit IVs before the chance of a repeated IV passes 2^-32 (NIST SP 800-38D). */
export const SEALS_PER_KEY_BUDGET = 2 ** 32;
const DEFAULT_SEAL_WARN_AT = 2 ** 28;

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
    assertPlace(opened.place, place, () => sealedKeyId(sealed) ?? null);
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
    assertPlace(opened.place, place, () => sealedKeyId(sealed) ?? null);
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
      const head = decipher.update(raw.subarray(IV_BYTES, raw.length - TAG_BYTES));
      // GCM's final() authenticates and gives no more bytes: nothing to join then.
      const tail = decipher.final();
      bytes = tail.length === 0 ? head : Buffer.concat([head, tail]);
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
  return new Keyring({ keys: readKeyringSpec(spec) });
}

function derive(secret: Uint8Array, use: 'seal' | 'fingerprint' | 'refs'): Buffer {
  return Buffer.from(hkdfSync('sha256', secret, SALT, use, 32));
}
