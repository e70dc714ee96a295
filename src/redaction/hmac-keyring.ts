import { createHmac, createSecretKey, type KeyObject, timingSafeEqual } from 'node:crypto';
import { sha256 } from '../fingerprint/sha256.js';

/** An HMAC key as configured: an id recorded in every reference, and at least 32 bytes of secret. */
export type HmacKeyInput = { id: string; secret: string | Uint8Array };

/**
 * What a MAC is of: an identifier, a credential reference, content, or an audit batch's tag
 * (batch-tag.ts; never a reference).
 */
export type RefDomain = 'identifier' | 'credential_ref' | 'content' | 'audit_batch';

type RefKind = 'hmac' | 'ref';

const HMAC_REF = /^hmac:([A-Za-z0-9._-]{1,32}):([A-Za-z0-9_-]{43})$/;
const OPAQUE_REF = /^ref:([A-Za-z0-9._-]{1,32}):([A-Za-z0-9_-]{22})$/;
/**
 * A reference's body is a digest part followed by a check: the check is a MAC, under the same
 * key, of the digest part. So a reference proves it was made by the ring: a string of the right
 * shape (a forged `hmac:k1:` + 43 characters, or a real secret that happens to look like one) is
 * not trusted, it is referenced like any other value. `hmac:` bodies: 32 + 11 characters (192
 * bits of digest, 66 of check); `ref:` bodies: 16 + 6 (96 and 36 bits), 22 in all, short enough
 * to read in an audit row.
 */
const BODY: Record<RefKind, { digest: number; check: number }> = {
  hmac: { digest: 32, check: 11 },
  ref: { digest: 16, check: 6 },
};
/**
 * Identifier refs are memoised: the same user and customer ids recur in event after event, and an
 * HMAC costs microseconds. Bounded in entries and in the length of what is cached. References
 * the ring made or verified are memoised too, so redacting a redacted event again costs a lookup.
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
  /** Per key, the key of the checks, derived from it (see `#check`). */
  readonly #checkKeys: Map<string, string>;
  readonly #idRefs = new Map<string, string>();
  /** References known to be this ring's (made here or verified), with their key id. */
  readonly #known = new Map<string, string>();

  constructor(keys: readonly HmacKeyInput[]) {
    const first = keys[0];
    if (!first) throw new Error('HmacKeyring needs at least one key');
    this.currentId = first.id;
    this.ids = keys.map((k) => k.id);
    this.#keys = new Map(
      keys.map((k) => [k.id, createSecretKey(typeof k.secret === 'string' ? Buffer.from(k.secret) : k.secret)]),
    );
    this.#checkKeys = new Map(
      [...this.#keys].map(([id, key]) => [id, createHmac('sha256', key).update('ref check key').digest('base64')]),
    );
  }

  /**
   * base64url HMAC of `data` in `domain` with the key `keyId` (the current key by default). A
   * string is given in one update with its domain (the same bytes as three updates): each update
   * is a call into native code, and a reference or a content hash is made for most events.
   */
  digest(domain: RefDomain, data: string | Uint8Array, keyId = this.currentId): string {
    const hmac = createHmac('sha256', this.#key(keyId));
    if (typeof data === 'string') return hmac.update(`${domain}\0${data}`).digest('base64url');
    return hmac.update(domain).update('\0').update(data).digest('base64url');
  }

  /** `hmac:<keyId>:<43 chars>` for an identifier. */
  identifierRef(value: string): string {
    const cached = this.#idRefs.get(value);
    if (cached !== undefined) return cached;
    const ref = this.#make('hmac', 'identifier', value);
    if (value.length <= MAX_CACHED_ID_LENGTH) {
      if (this.#idRefs.size >= MAX_CACHED_IDS) this.#idRefs.clear();
      this.#idRefs.set(value, ref);
    }
    return ref;
  }

  /**
   * The identifier refs of `value` under every key of the ring, current first: what to look a
   * value up by in a store written before and after a rotation.
   */
  identifierRefs(value: string): string[] {
    return this.ids.map((id) =>
      id === this.currentId ? this.identifierRef(value) : `hmac:${id}:${this.#body('hmac', 'identifier', value, id)}`,
    );
  }

  /** `ref:<keyId>:<22 chars>` for a credential reference. */
  opaqueRef(value: string): string {
    return this.#make('ref', 'credential_ref', value);
  }

  /** `hmac:<keyId>:<43 chars>` over content (a prompt, a body). Not memoised: content rarely recurs. */
  contentHash(data: string | Uint8Array): string {
    return `hmac:${this.currentId}:${this.#body('hmac', 'content', data, this.currentId)}`;
  }

  /**
   * The key id of `value` when it is a reference made by one of this ring's keys (of the shape
   * `kind` asks for), else undefined. The check part of the reference is verified: a ref-shaped
   * string with an unknown key id or a wrong check is not trusted, it is hashed again like any
   * other value.
   */
  recognise(value: string, kind: RefKind): string | undefined {
    if (!value.startsWith(kind === 'hmac' ? 'hmac:' : 'ref:')) return undefined;
    const known = this.#known.get(value);
    if (known !== undefined) return known;
    const m = (kind === 'hmac' ? HMAC_REF : OPAQUE_REF).exec(value);
    if (!m || !this.#keys.has(m[1]!)) return undefined;
    const { digest } = BODY[kind];
    const body = m[2]!;
    if (!same(this.#check(kind, body.slice(0, digest), m[1]!), body.slice(digest))) return undefined;
    this.#remember(value, m[1]!);
    return m[1];
  }

  /** True when `ref` is the reference of `value` in `domain` under any key of the ring. */
  verify(ref: string, value: string, domain: RefDomain): boolean {
    const kind: RefKind = domain === 'credential_ref' ? 'ref' : 'hmac';
    const m = (kind === 'hmac' ? HMAC_REF : OPAQUE_REF).exec(ref);
    if (!m || !this.#keys.has(m[1]!)) return false;
    return same(this.#body(kind, domain, value, m[1]!), m[2]!);
  }

  #key(keyId: string): KeyObject {
    const key = this.#keys.get(keyId);
    if (!key) throw new Error(`unknown HMAC key id ${keyId}`);
    return key;
  }

  /**
   * The check of a digest part: SHA-256 of the key's check key, the kind and the digest part,
   * truncated. A secret-prefix hash is a sound MAC for messages of one fixed length (a length
   * extension makes a longer message, which no check is ever asked for), and one SHA-256 call
   * costs a third of an HMAC: every reference made or recognised pays it.
   */
  #check(kind: RefKind, digestPart: string, keyId: string): string {
    const checkKey = this.#checkKeys.get(keyId);
    if (checkKey === undefined) throw new Error(`unknown HMAC key id ${keyId}`);
    return sha256(`${checkKey}\0${kind}\0${digestPart}`, 'base64url').slice(0, BODY[kind].check);
  }

  #body(kind: RefKind, domain: RefDomain, data: string | Uint8Array, keyId: string): string {
    const digestPart = this.digest(domain, data, keyId).slice(0, BODY[kind].digest);
    return digestPart + this.#check(kind, digestPart, keyId);
  }

  #make(kind: RefKind, domain: RefDomain, data: string | Uint8Array): string {
    const ref = `${kind}:${this.currentId}:${this.#body(kind, domain, data, this.currentId)}`;
    this.#remember(ref, this.currentId);
    return ref;
  }

  #remember(ref: string, keyId: string): void {
    if (this.#known.size >= MAX_CACHED_IDS) this.#known.clear();
    this.#known.set(ref, keyId);
  }
}

function same(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}
