import { createHmac, createSecretKey, type KeyObject, timingSafeEqual } from 'node:crypto';

/** An HMAC key as configured: an id recorded in every reference, and at least 32 bytes of secret. */
export type HmacKeyInput = { id: string; secret: string | Uint8Array };

/** Which kind of reference: `hmac:` (identifiers, content hashes) or the shorter opaque `ref:`. */
export type RefDomain = 'identifier' | 'credential_ref' | 'content';

const HMAC_REF = /^hmac:([A-Za-z0-9._-]{1,32}):([A-Za-z0-9_-]{43})$/;
const OPAQUE_REF = /^ref:([A-Za-z0-9._-]{1,32}):([A-Za-z0-9_-]{22})$/;
/** 22 base64url characters = 132 bits: unguessable, yet short enough to read in an audit row. */
const OPAQUE_LENGTH = 22;
/**
 * Identifier refs are memoised: the same user and customer ids recur in event after event, and an
 * HMAC costs microseconds. Bounded in entries and in the length of what is cached.
 */
const MAX_CACHED_IDS = 20_000;
const MAX_CACHED_ID_LENGTH = 128;

/**
 * The policy's HMAC-SHA-256 keys. The first key makes new references; every key is still
 * recognised and verifiable, so a rotation does not re-hash (or break) references already stored.
 *
 * Each domain is mixed into the MAC, so an identifier ref and a content hash of the same text
 * differ and cannot be joined. Secrets live in KeyObjects: inspecting the ring shows no bytes.
 */
export class HmacKeyring {
  readonly currentId: string;
  readonly ids: readonly string[];
  readonly #keys: Map<string, KeyObject>;
  readonly #idRefs = new Map<string, string>();

  constructor(keys: readonly HmacKeyInput[]) {
    const first = keys[0];
    if (!first) throw new Error('HmacKeyring needs at least one key');
    this.currentId = first.id;
    this.ids = keys.map((k) => k.id);
    this.#keys = new Map(
      keys.map((k) => [k.id, createSecretKey(typeof k.secret === 'string' ? Buffer.from(k.secret) : k.secret)]),
    );
  }

  /** base64url HMAC of `data` in `domain` with the key `keyId` (the current key by default). */
  digest(domain: RefDomain, data: string | Uint8Array, keyId = this.currentId): string {
    const key = this.#keys.get(keyId);
    if (!key) throw new Error(`unknown HMAC key id ${keyId}`);
    return createHmac('sha256', key).update(domain).update('\0').update(data).digest('base64url');
  }

  /** `hmac:<keyId>:<43 chars>` for an identifier. */
  identifierRef(value: string): string {
    const cached = this.#idRefs.get(value);
    if (cached !== undefined) return cached;
    const ref = `hmac:${this.currentId}:${this.digest('identifier', value)}`;
    if (value.length <= MAX_CACHED_ID_LENGTH) {
      if (this.#idRefs.size >= MAX_CACHED_IDS) this.#idRefs.clear();
      this.#idRefs.set(value, ref);
    }
    return ref;
  }

  /** `ref:<keyId>:<22 chars>` for a credential reference. */
  opaqueRef(value: string): string {
    return `ref:${this.currentId}:${this.digest('credential_ref', value).slice(0, OPAQUE_LENGTH)}`;
  }

  /** `hmac:<keyId>:<43 chars>` over content (a prompt, a body). */
  contentHash(data: string | Uint8Array): string {
    return `hmac:${this.currentId}:${this.digest('content', data)}`;
  }

  /**
   * The key id of `value` when it already is a reference made by one of this ring's keys (of the
   * shape `kind` asks for), else undefined. A ref-shaped string with an unknown key id is not
   * trusted: it is hashed again like any other value.
   */
  recognise(value: string, kind: 'hmac' | 'ref'): string | undefined {
    if (!value.startsWith(kind === 'hmac' ? 'hmac:' : 'ref:')) return undefined;
    const m = (kind === 'hmac' ? HMAC_REF : OPAQUE_REF).exec(value);
    return m && this.#keys.has(m[1]!) ? m[1] : undefined;
  }

  /** True when `ref` is the reference of `value` in `domain` under any key of the ring. */
  verify(ref: string, value: string, domain: RefDomain): boolean {
    const m = (domain === 'credential_ref' ? OPAQUE_REF : HMAC_REF).exec(ref);
    if (!m || !this.#keys.has(m[1]!)) return false;
    let expected = this.digest(domain, value, m[1]!);
    if (domain === 'credential_ref') expected = expected.slice(0, OPAQUE_LENGTH);
    const a = Buffer.from(expected);
    const b = Buffer.from(m[2]!);
    return a.length === b.length && timingSafeEqual(a, b);
  }
}
