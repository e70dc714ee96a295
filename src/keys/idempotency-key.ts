import { z } from 'zod';
import { InvalidIdempotencyKeyError } from '../errors/errors.js';
import { sha256 } from '../fingerprint/sha256.js';

/**
 * The identity of one intended operation. Made when the intent is accepted, before the first
 * attempt, and carried by every retry. Attempt numbers, worker ids and timestamps never enter it.
 *
 * @example
 * const key = { namespace: 'acme/assets.create', resourceKey: 'task:42', version: 'v1' };
 */
export type IdempotencyKey = {
  /** Scopes the action type and tenant, e.g. `acme/assets.create`. */
  namespace: string;
  /** Names the intended operation, e.g. `task:42`. */
  resourceKey: string;
  /** The policy version; a new version never replays an old result. */
  version: string;
};

/** Length bounds of the key parts, in UTF-16 code units. */
export const KEY_LIMITS = { namespace: 200, resourceKey: 512, version: 64 } as const;

/** Longest form handed to downstream APIs and stored as the ledger's primary key. */
export const MAX_BOUNDED_KEY_LENGTH = 255;

// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are exactly what is refused
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;

const part = (max: number) =>
  z
    .string()
    .min(1, 'must not be empty')
    // String length (UTF-16 code units), as documented: zod's max() counts code points.
    .refine((s) => s.length <= max, `must be at most ${max} characters`)
    .refine((s) => !CONTROL.test(s), 'must not contain control characters')
    .refine((s) => s.isWellFormed(), 'must be well-formed Unicode (no lone surrogates)')
    .refine((s) => s.trim() === s, 'must not start or end with white space');

/** zod schema of {@link IdempotencyKey}; unknown fields are refused. */
export const idempotencyKeySchema = z
  .object({
    namespace: part(KEY_LIMITS.namespace),
    resourceKey: part(KEY_LIMITS.resourceKey),
    version: part(KEY_LIMITS.version),
  })
  .strict();

/**
 * Validates a key, throwing {@link InvalidIdempotencyKeyError} with every issue.
 */
export function parseIdempotencyKey(value: unknown): IdempotencyKey {
  // Every claim and every job parses a key: a well-formed one is checked by hand, without zod's
  // issue machinery. It accepts only what the schema accepts; anything else goes to the schema,
  // which says why.
  if (isWellFormedKey(value))
    return { namespace: value.namespace, resourceKey: value.resourceKey, version: value.version };
  const parsed = idempotencyKeySchema.safeParse(value);
  if (!parsed.success) {
    throw new InvalidIdempotencyKeyError(
      parsed.error.issues.map((i) => ({ path: i.path.join('.'), message: i.message })),
    );
  }
  return parsed.data;
}

/**
 * The number of fields of a plain object (prototype Object.prototype, as JSON.parse makes them;
 * no inherited enumerable field), or -1 for anything else.
 */
export function ownFieldCount(value: unknown): number {
  if (typeof value !== 'object' || value === null || Object.getPrototypeOf(value) !== Object.prototype) return -1;
  let fields = 0;
  for (const name in value) {
    if (!Object.hasOwn(value, name)) return -1;
    fields++;
  }
  return fields;
}

/** A key part the schema's `part()` accepts: the same checks, in the same terms. */
export function isPart(s: unknown, max: number): boolean {
  return (
    typeof s === 'string' && s.length >= 1 && s.length <= max && !CONTROL.test(s) && s.isWellFormed() && s.trim() === s
  );
}

/** True only for a plain object of exactly the three parts, each one {@link idempotencyKeySchema} accepts. */
export function isWellFormedKey(value: unknown): value is IdempotencyKey {
  if (ownFieldCount(value) !== 3) return false;
  const v = value as Record<string, unknown>;
  return (
    isPart(v.namespace, KEY_LIMITS.namespace) &&
    isPart(v.resourceKey, KEY_LIMITS.resourceKey) &&
    isPart(v.version, KEY_LIMITS.version)
  );
}

/**
 * The canonical string of a key: each part percent-encoded (so it never contains `:`), joined
 * by `:`. Injective: `('a:b','c')` and `('a','b:c')` differ. Not bounded in length; see
 * {@link boundedKey} for the form stored in the ledger and sent downstream.
 */
export function canonicalKey(key: IdempotencyKey): string {
  return `${encodedPart(key.namespace, lastNamespace)}:${encodedPart(key.resourceKey)}:${encodedPart(key.version, lastVersion)}`;
}

/** What `encodeURIComponent` leaves as it is: a part of only these is its own encoding. */
const UNRESERVED = /^[A-Za-z0-9\-_.!~*'()]*$/;

/** The last part encoded, and its encoding: an operation's keys share their namespace and version. */
type LastEncoded = { part: string; encoded: string };
const lastNamespace: LastEncoded = { part: '', encoded: '' };
const lastVersion: LastEncoded = { part: '', encoded: '' };

/** `encodeURIComponent(part)`, the same text (and the same URIError for a lone surrogate), made once per run of one part. */
function encodedPart(part: string, last?: LastEncoded): string {
  if (last !== undefined && last.part === part) return last.encoded;
  const encoded = UNRESERVED.test(part) ? part : encodeURIComponent(part);
  if (last !== undefined) {
    last.part = part;
    last.encoded = encoded;
  }
  return encoded;
}

const HASH_PREFIX_LENGTH = 200;

/**
 * The bounded key (≤ 255 ASCII characters, stable forever for the same key): the canonical
 * string when it fits; otherwise its first 200 characters, `#` and the base64url SHA-256 of the
 * whole canonical string. `#` never occurs in a canonical string, so the two forms cannot
 * collide. This is `ctx.idempotencyKey`, the ledger's primary key and the value to pass to an
 * `Idempotency-Key` header.
 */
export function boundedKey(key: IdempotencyKey): string {
  const canonical = canonicalKey(key);
  if (canonical.length <= MAX_BOUNDED_KEY_LENGTH) return canonical;
  const digest = sha256(canonical, 'base64url');
  return `${canonical.slice(0, HASH_PREFIX_LENGTH)}#${digest}`;
}

/** Parses a canonical string back into its parts (for operators who paste a key). */
export function parseCanonicalKey(text: string): IdempotencyKey {
  const parts = text.split(':');
  if (parts.length !== 3 || text.includes('#')) {
    throw new InvalidIdempotencyKeyError([
      { path: '', message: 'expected the canonical form namespace:resourceKey:version (percent-encoded parts)' },
    ]);
  }
  try {
    const [namespace, resourceKey, version] = parts.map((p) => decodeURIComponent(p));
    return parseIdempotencyKey({ namespace, resourceKey, version });
  } catch (err) {
    if (err instanceof InvalidIdempotencyKeyError) throw err;
    throw new InvalidIdempotencyKeyError([{ path: '', message: 'malformed percent-encoding' }]);
  }
}
