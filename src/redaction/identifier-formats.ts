/**
 * Identifier formats: which values an audit event's identifier fields keep in clear. A value is
 * told as it is when it matches a *format* — a built-in one whose structure is checked, one the
 * application declares (per field, or `'*'` for every identifier field), or the default word-like
 * grammar of `identifier-grammar.ts` — and becomes a keyed reference otherwise. Declaring is the
 * way to keep random-by-design ids (`cus_NffrFeUfNV2Hib`, a pod name's hash suffix) readable: a
 * grammar cannot tell them from a token, the application can.
 *
 * Built-in formats, checked in every identifier field:
 * - `uuid`: the 8-4-4-4-12 hex form, any version (v1, v4, v7…);
 * - `ulid`: 26 Crockford base32 characters whose 48-bit time is in range (see {@link timeInRange});
 * - `ksuid`: 27 base62 characters, below 2^160, whose 32-bit time is in range;
 * - `objectid`: a MongoDB ObjectId, 24 hex characters whose leading 32-bit time is in range.
 *
 * Built-in formats a field must be given (they are 16 or 32 hex characters, which a random token
 * is too): `trace-id` (W3C, 32 hex, not all zeros) and `span-id` (16 hex, not all zeros); they
 * hold in fields named `traceId` / `spanId` without being declared.
 *
 * A format whose body is random (KSUID, ObjectId) admits a random token of its length when the
 * token's time bits happen to fall in range: about 5% of random 27-character base62 strings, 19%
 * of random 24-character hex strings, 0.3% of random ULID-shaped strings. Every check is one pass
 * over at most 36 characters.
 */

/** Names of the built-in formats. */
export const BUILTIN_IDENTIFIER_FORMATS = ['uuid', 'ulid', 'ksuid', 'objectid', 'trace-id', 'span-id'] as const;
export type BuiltinIdentifierFormat = (typeof BUILTIN_IDENTIFIER_FORMATS)[number];

/**
 * A format an application declares: a built-in's name; a regular expression the whole value must
 * match (keep it linear: no nested quantifiers); a prefix with its body (`{ prefix: 'cus_' }`:
 * the prefix, then 1-64 ASCII letters and digits, or `body` when given); or a predicate.
 */
export type IdentifierFormat =
  | BuiltinIdentifierFormat
  | RegExp
  | { prefix: string; body?: RegExp }
  | ((value: string) => boolean);

/**
 * Declared formats by field name (`taskId`, `actorId`, `resourceId`, `jobId`…) or `'*'` for
 * every identifier field.
 *
 * @example
 * identifiers: { taskId: ['ulid', /^task-[a-z]+-[0-9a-f]{4,12}$/], '*': [{ prefix: 'cus_' }] }
 */
export type IdentifierFormats = Readonly<Record<string, readonly IdentifierFormat[]>>;

/** A compiled format: a whole-value test. */
type Check = (v: string) => boolean;

const DAY_MS = 86_400_000;
/** 2000-01-01T00:00:00Z: no id of these formats is older. */
const EARLIEST_MS = 946_684_800_000;

/** Whether a time embedded in an id is plausible: from 2000 to a day ahead of this clock. */
export function timeInRange(ms: number): boolean {
  return ms >= EARLIEST_MS && ms <= Date.now() + DAY_MS;
}

const UUID = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/;
const HEX24 = /^[0-9a-f]{24}$/;
const HEX = (n: number) => new RegExp(`^[0-9a-f]{${n}}$`);
const HEX16 = HEX(16);
const HEX32 = HEX(32);

/** Crockford's base32 digit of a character code, or -1 (I, L, O and U are not digits). */
function crockford(c: number): number {
  if (c >= 48 && c <= 57) return c - 48;
  const u = c >= 97 && c <= 122 ? c - 32 : c;
  if (u < 65 || u > 90) return -1;
  // A..Z without I L O U: 10..31.
  const letters = 'ABCDEFGHJKMNPQRSTVWXYZ';
  const i = letters.indexOf(String.fromCharCode(u));
  return i < 0 ? -1 : 10 + i;
}

/** A ULID: 26 characters of one case, the first 10 its milliseconds (48 bits), in range. */
export function isUlid(v: string): boolean {
  if (v.length !== 26) return false;
  const lower = v !== v.toUpperCase();
  if (lower && v !== v.toLowerCase()) return false;
  let ms = 0;
  for (let i = 0; i < 26; i++) {
    const d = crockford(v.charCodeAt(i));
    if (d < 0) return false;
    if (i < 10) ms = ms * 32 + d;
  }
  return timeInRange(ms);
}

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
/** KSUID's epoch: 2014-05-13T16:53:20Z, in seconds. */
const KSUID_EPOCH_S = 1_400_000_000;
const TWO_128 = 1n << 128n;
const TWO_160 = 1n << 160n;

/** A KSUID: 27 base62 characters, a 160-bit value whose first 32 bits are its seconds since 2014-05-13, in range. */
export function isKsuid(v: string): boolean {
  if (v.length !== 27) return false;
  let n = 0n;
  for (let i = 0; i < 27; i++) {
    const d = BASE62.indexOf(v[i] as string);
    if (d < 0) return false;
    n = n * 62n + BigInt(d);
  }
  if (n >= TWO_160) return false;
  return timeInRange((Number(n / TWO_128) + KSUID_EPOCH_S) * 1000);
}

/** A MongoDB ObjectId: 24 lower-case hex characters, the first 8 its seconds, in range. */
export function isObjectId(v: string): boolean {
  return HEX24.test(v) && timeInRange(Number.parseInt(v.slice(0, 8), 16) * 1000);
}

const notZero = (v: string) => !/^0+$/.test(v);

const BUILTIN_CHECKS: Record<BuiltinIdentifierFormat, Check> = {
  uuid: (v) => UUID.test(v),
  ulid: isUlid,
  ksuid: isKsuid,
  objectid: isObjectId,
  'trace-id': (v) => HEX32.test(v) && notZero(v),
  'span-id': (v) => HEX16.test(v) && notZero(v),
};

/** The built-in formats checked in every identifier field, without declaration. */
const ALWAYS: readonly Check[] = [BUILTIN_CHECKS.uuid, isUlid, isKsuid, isObjectId];

/** True when `v` matches a built-in format that holds in every identifier field (UUID, ULID, KSUID, ObjectId). */
export function isBuiltinIdentifier(v: string): boolean {
  if (v.length < 24 || v.length > 36) return false;
  for (const check of ALWAYS) if (check(v)) return true;
  return false;
}

/** Built-ins that hold in a field of that name without being declared. */
const FIELD_BUILTINS: Readonly<Record<string, Check>> = {
  traceId: BUILTIN_CHECKS['trace-id'],
  spanId: BUILTIN_CHECKS['span-id'],
};

const PREFIX_BODY = /^[A-Za-z0-9]{1,64}$/;

/** A regular expression without the flags that make `test` stateful. */
function stateless(re: RegExp): RegExp {
  return re.global || re.sticky ? new RegExp(re.source, re.flags.replace(/[gy]/g, '')) : re;
}

function compileOne(f: IdentifierFormat): Check {
  if (typeof f === 'string') return BUILTIN_CHECKS[f];
  if (typeof f === 'function') return (v) => f(v) === true;
  if (f instanceof RegExp) {
    const re = stateless(f);
    // The whole value must match, anchored or not.
    return (v) => {
      const m = re.exec(v);
      return m !== null && m.index === 0 && m[0].length === v.length;
    };
  }
  const { prefix } = f;
  const body = f.body ? compileOne(f.body) : (v: string) => PREFIX_BODY.test(v);
  return (v) => v.startsWith(prefix) && v.length > prefix.length && body(v.slice(prefix.length));
}

/** Declared formats, compiled: a test per field, and one for every identifier field. */
export type CompiledIdentifierFormats = {
  /** The application's formats for `field` (its own, then `'*'`), and the field's own built-ins. */
  matches(field: string, v: string): boolean;
  /** Whether anything is declared (the common case is not). */
  readonly declared: boolean;
};

/** Nothing declared. */
export const NO_DECLARED_FORMATS: CompiledIdentifierFormats = {
  matches: (field, v) => FIELD_BUILTINS[field]?.(v) ?? false,
  declared: false,
};

/** Compiles declared formats (validated by the policy's schema). */
export function compileIdentifierFormats(formats: IdentifierFormats | undefined): CompiledIdentifierFormats {
  if (!formats || Object.keys(formats).length === 0) return NO_DECLARED_FORMATS;
  const all = (formats['*'] ?? []).map(compileOne);
  const byField = new Map<string, Check[]>();
  for (const [field, list] of Object.entries(formats)) {
    if (field !== '*') byField.set(field, [...list.map(compileOne), ...all]);
  }
  return {
    declared: true,
    matches(field, v) {
      const own = FIELD_BUILTINS[field];
      if (own?.(v)) return true;
      for (const check of byField.get(field) ?? all) if (check(v)) return true;
      return false;
    },
  };
}

const COMPILED = new WeakMap<object, CompiledIdentifierFormats>();

/** Attaches compiled formats to a compiled redaction policy (see `defineRedactionPolicy`). */
export function attachIdentifierFormats(policy: object, formats: CompiledIdentifierFormats): void {
  COMPILED.set(policy, formats);
}

/** The declared formats of a policy (none for a policy that declares none). */
export function identifierFormatsOf(policy: object): CompiledIdentifierFormats {
  return COMPILED.get(policy) ?? NO_DECLARED_FORMATS;
}
