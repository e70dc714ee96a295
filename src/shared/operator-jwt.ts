import { createPublicKey } from 'node:crypto';
import { IdempotencyConfigError } from '../errors/errors.js';

/** A JSON Web Key Set as an identity provider publishes it: `{ "keys": [ … ] }`, public keys only. */
export type OperatorJwks = { keys: readonly Record<string, unknown>[] };

/**
 * Operators identified by JWTs their identity provider signs: the token is verified (signature by
 * a key of the provider, issuer, audience, expiry), its `actorClaim` names who answers and its
 * `namespacesClaim` the key namespaces they may answer. Exactly one of `jwksUrl`, `jwks` and
 * `publicKey` says where the keys come from.
 *
 * @example
 * const jwt: OperatorJwtOptions = {
 *   issuer: 'https://login.example.com/',
 *   audience: 'bullmq-idempotency',
 *   jwksUrl: 'https://login.example.com/.well-known/jwks.json',
 * };
 */
export type OperatorJwtOptions = {
  /** The accepted `iss` (one, or a list). */
  issuer: string | readonly string[];
  /** The accepted `aud` (one, or a list): the token must name one of them. */
  audience: string | readonly string[];
  /** The provider's JWKS, fetched over HTTPS (plain HTTP only on loopback), cached, re-fetched for an unknown `kid`. */
  jwksUrl?: string;
  /** A JWKS given in the configuration (public keys). */
  jwks?: OperatorJwks;
  /** One public key, PEM (SPKI, `-----BEGIN PUBLIC KEY-----`). */
  publicKey?: string;
  /** The claim whose value is the actor answers are recorded under. @defaultValue `'sub'` */
  actorClaim?: string;
  /**
   * The claim that lists the namespaces the token may answer, in the form of `BQI_OPERATORS`'s
   * (`acme/payments.refund`, `acme/payments.*`, `*`): an array of strings, or one string of entries
   * separated by spaces (a `scope`). A token without it may answer nothing.
   * @defaultValue `'bqi_namespaces'`
   */
  namespacesClaim?: string;
  /**
   * Only the entries of the namespaces claim that begin with this prefix count, without it: with
   * `namespacesClaim: 'scope'` and `namespacePrefix: 'bqi:'`, the scope `openid bqi:acme/payments.*`
   * answers `acme/payments.*`. Unset: every entry is a namespace.
   */
  namespacePrefix?: string;
  /**
   * The signature algorithms accepted: asymmetric ones only (a shared secret would let whoever
   * verifies also sign). @defaultValue every asymmetric JWS algorithm (RS*, PS*, ES*, EdDSA, Ed25519)
   */
  algorithms?: readonly string[];
  /** Seconds of clock skew tolerated on `exp`, `nbf` and `iat`. @defaultValue 30 */
  clockToleranceSec?: number;
};

/** The asymmetric JWS algorithms: the default list, and the only ones that may be configured. */
export const ASYMMETRIC_JWS_ALGORITHMS = [
  'RS256',
  'RS384',
  'RS512',
  'PS256',
  'PS384',
  'PS512',
  'ES256',
  'ES384',
  'ES512',
  'EdDSA',
  'Ed25519',
] as const;

export const OPERATOR_JWT_DEFAULTS = {
  actorClaim: 'sub',
  namespacesClaim: 'bqi_namespaces',
  clockToleranceSec: 30,
} as const;

const CLAIM_NAME = /^[A-Za-z0-9_.:/-]{1,100}$/;

/**
 * The options checked, with their defaults, and the keys of `publicKey` turned into a JWKS.
 * @throws {@link IdempotencyConfigError} (`option: 'operatorJwt'`) naming what is wrong, never a key
 */
export function checkOperatorJwt(o: OperatorJwtOptions): Required<
  Pick<OperatorJwtOptions, 'actorClaim' | 'namespacesClaim' | 'algorithms' | 'clockToleranceSec'>
> & {
  issuer: string[];
  audience: string[];
  jwksUrl?: URL;
  jwks?: OperatorJwks;
  /** True for `publicKey`: one key, whatever `kid` a token names. */
  singleKey?: boolean;
  namespacePrefix?: string;
} {
  const list = (v: unknown, what: string) => {
    const items = typeof v === 'string' ? [v] : Array.isArray(v) ? v : [];
    if (items.length === 0 || !items.every((s) => typeof s === 'string' && s.trim() !== '')) {
      throw jwtConfigError(`${what} is required: one or more non-empty strings`);
    }
    return items.map((s: string) => s.trim());
  };
  const issuer = list(o.issuer, 'issuer');
  const audience = list(o.audience, 'audience');
  const sources = [o.jwksUrl, o.jwks, o.publicKey].filter((s) => s !== undefined);
  if (sources.length !== 1) {
    throw jwtConfigError('give exactly one of jwksUrl, jwks and publicKey: where the signing keys come from');
  }
  const actorClaim = o.actorClaim ?? OPERATOR_JWT_DEFAULTS.actorClaim;
  const namespacesClaim = o.namespacesClaim ?? OPERATOR_JWT_DEFAULTS.namespacesClaim;
  for (const [what, claim] of [
    ['actorClaim', actorClaim],
    ['namespacesClaim', namespacesClaim],
  ] as const) {
    if (!CLAIM_NAME.test(claim)) throw jwtConfigError(`${what} must be a claim name (letters, digits, _ . : / -)`);
  }
  if (o.namespacePrefix !== undefined && (o.namespacePrefix === '' || /\s/.test(o.namespacePrefix))) {
    throw jwtConfigError('namespacePrefix must be non-empty and hold no white space');
  }
  const algorithms = [...(o.algorithms ?? ASYMMETRIC_JWS_ALGORITHMS)];
  const allowed: readonly string[] = ASYMMETRIC_JWS_ALGORITHMS;
  if (algorithms.length === 0 || !algorithms.every((a) => allowed.includes(a))) {
    throw jwtConfigError(`algorithms must be asymmetric JWS algorithms: ${ASYMMETRIC_JWS_ALGORITHMS.join(', ')}`);
  }
  const clockToleranceSec = o.clockToleranceSec ?? OPERATOR_JWT_DEFAULTS.clockToleranceSec;
  if (!Number.isInteger(clockToleranceSec) || clockToleranceSec < 0 || clockToleranceSec > 300) {
    throw jwtConfigError('clockToleranceSec must be an integer from 0 to 300');
  }
  return {
    issuer,
    audience,
    actorClaim,
    namespacesClaim,
    algorithms,
    clockToleranceSec,
    ...(o.namespacePrefix === undefined ? {} : { namespacePrefix: o.namespacePrefix }),
    ...(o.jwksUrl !== undefined ? { jwksUrl: jwksUrlOf(o.jwksUrl) } : {}),
    ...(o.jwks !== undefined ? { jwks: publicJwks(o.jwks) } : {}),
    ...(o.publicKey !== undefined ? { jwks: jwksOfPem(o.publicKey), singleKey: true } : {}),
  };
}

function jwksUrlOf(text: string): URL {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw jwtConfigError('jwksUrl must be a URL');
  }
  const loopback = ['127.0.0.1', '[::1]', 'localhost'].includes(url.hostname);
  if (url.protocol !== 'https:' && !(url.protocol === 'http:' && loopback)) {
    throw jwtConfigError('jwksUrl must be https:// (plain http:// only on loopback): the keys decide who may answer');
  }
  return url;
}

/** A JWKS of public keys only: a private or symmetric member is refused (it has no place here). */
function publicJwks(jwks: unknown): OperatorJwks {
  const keys = (jwks as { keys?: unknown } | null)?.keys;
  if (!Array.isArray(keys) || keys.length === 0 || !keys.every((k) => k !== null && typeof k === 'object')) {
    throw jwtConfigError('jwks must be a JSON Web Key Set: {"keys": [ … ]} with at least one key');
  }
  for (const [i, k] of (keys as Record<string, unknown>[]).entries()) {
    if (k.kty === 'oct' || 'd' in k) {
      throw jwtConfigError(`jwks key ${i + 1} is not a public key (a secret or private key must not be configured)`);
    }
  }
  return { keys: keys as Record<string, unknown>[] };
}

function jwksOfPem(pem: string): OperatorJwks {
  // createPublicKey would derive the public half of a private key: a private key is refused instead.
  if (/PRIVATE KEY/.test(pem)) throw jwtConfigError('publicKey is a private key: configure its public half only');
  try {
    const key = createPublicKey({ key: pem, format: 'pem' });
    return { keys: [key.export({ format: 'jwk' }) as Record<string, unknown>] };
  } catch {
    throw jwtConfigError('publicKey must be a public key in PEM (-----BEGIN PUBLIC KEY-----)');
  }
}

function jwtConfigError(message: string): IdempotencyConfigError {
  return new IdempotencyConfigError(`operator JWTs: ${message}`, { option: 'operatorJwt' });
}

/** A JWKS given as text (`BQI_OPERATOR_JWKS`): JSON. */
export function parseOperatorJwks(text: string): OperatorJwks {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw jwtConfigError('jwks is not JSON');
  }
  return publicJwks(value);
}
