import { createLocalJWKSet, createRemoteJWKSet, type JWTPayload, type JWTVerifyGetKey, jwtVerify } from 'jose';
import { checkOperatorJwt, type OperatorJwtOptions } from '../shared/operator-jwt.js';
import { isNamespacePattern, isOperatorActor, type Operator } from '../shared/operators.js';

/** Stable codes of a refused operator JWT (401, or 503 when the keys cannot be had). */
export const OPERATOR_JWT_CODES = {
  /** `exp` is past (beyond the clock tolerance). */
  expired: 'TOKEN_EXPIRED',
  /** A claim is wrong or missing: issuer, audience, `nbf`, `exp`, the actor or the namespaces claim. */
  claimInvalid: 'TOKEN_CLAIM_INVALID',
  /** No key of the JWKS matches the token's `kid` and algorithm. */
  keyUnknown: 'TOKEN_KEY_UNKNOWN',
  /** The token's `alg` is not an accepted asymmetric algorithm (`none`, `HS256` among the refused). */
  algorithmNotAllowed: 'TOKEN_ALGORITHM_NOT_ALLOWED',
  /** The signature does not verify with the key it names. */
  signatureInvalid: 'TOKEN_SIGNATURE_INVALID',
  /** Not a compact JWS with a JSON header and claims. */
  malformed: 'TOKEN_MALFORMED',
  /** The JWKS could not be fetched or read (503: the token was not judged). */
  keysUnavailable: 'TOKEN_KEYS_UNAVAILABLE',
} as const;

export type OperatorJwtCode = (typeof OPERATOR_JWT_CODES)[keyof typeof OPERATOR_JWT_CODES];

/** What a verified token stands for: an operator without a digest. */
export type JwtOperator = Pick<Operator, 'actor' | 'namespaces'>;

export type OperatorJwtVerdict =
  | { ok: true; operator: JwtOperator }
  | { ok: false; status: 401 | 503; code: OperatorJwtCode; message: string };

/** Three base64url parts: the compact form of a JWS. */
const COMPACT_JWS = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/;

/** Whether a bearer token has the shape of a JWT (so it is verified as one, not looked up). */
export function looksLikeJwt(token: string): boolean {
  return token.length <= 16_384 && COMPACT_JWS.test(token);
}

/**
 * A verifier of operator JWTs (see {@link OperatorJwtOptions}): signature, `alg` among the
 * accepted asymmetric ones, `iss`, `aud`, `exp` (required), `nbf`; then the actor claim (an actor
 * as `BQI_OPERATORS` allows one) and the namespaces claim. Never throws: a refusal carries a
 * stable code and a message that quotes nothing of the token.
 *
 * @throws {@link IdempotencyConfigError} at creation, for options that cannot work
 */
export function operatorJwtVerifier(options: OperatorJwtOptions): (token: string) => Promise<OperatorJwtVerdict> {
  const o = checkOperatorJwt(options);
  const set = o.jwksUrl
    ? createRemoteJWKSet(o.jwksUrl, { timeoutDuration: 5_000, cooldownDuration: 30_000, cacheMaxAge: 600_000 })
    : createLocalJWKSet(o.jwks as Parameters<typeof createLocalJWKSet>[0]);
  // One configured public key has no kid: it is the key, whatever kid a token names.
  const keys: JWTVerifyGetKey = o.singleKey
    ? (header, token) => {
        const { kid: _ignored, ...rest } = header;
        return set(rest, token);
      }
    : set;
  return async (token) => {
    if (!looksLikeJwt(token)) return refuse(401, OPERATOR_JWT_CODES.malformed, 'the bearer token is not a JWT');
    let payload: JWTPayload;
    try {
      ({ payload } = await jwtVerify(token, keys, {
        issuer: o.issuer,
        audience: o.audience,
        algorithms: [...o.algorithms],
        clockTolerance: o.clockToleranceSec,
        requiredClaims: ['exp', o.actorClaim],
      }));
    } catch (err) {
      return refusalOf(err);
    }
    const actor = payload[o.actorClaim];
    if (!isOperatorActor(actor)) {
      return refuse(
        401,
        OPERATOR_JWT_CODES.claimInvalid,
        `the "${o.actorClaim}" claim must be an actor: 1 to 200 characters without white space, ";", "," or "="`,
      );
    }
    const namespaces = namespacesOf(payload[o.namespacesClaim], o.namespacePrefix);
    if (namespaces === undefined) {
      return refuse(
        401,
        OPERATOR_JWT_CODES.claimInvalid,
        `the "${o.namespacesClaim}" claim must list namespaces (an array of strings or one string separated by spaces): an exact namespace, a prefix ending in "*", or "*"`,
      );
    }
    return { ok: true, operator: { actor, namespaces } };
  };
}

/** The namespaces a claim lists, [] when it is absent, undefined when it is malformed. */
function namespacesOf(claim: unknown, prefix: string | undefined): string[] | undefined {
  if (claim === undefined) return [];
  const items =
    typeof claim === 'string'
      ? claim.split(' ').filter((s) => s !== '')
      : Array.isArray(claim) && claim.every((s) => typeof s === 'string')
        ? (claim as string[])
        : undefined;
  if (items === undefined) return undefined;
  const picked =
    prefix === undefined ? items : items.filter((s) => s.startsWith(prefix)).map((s) => s.slice(prefix.length));
  return picked.every(isNamespacePattern) ? picked : undefined;
}

function refuse(status: 401 | 503, code: OperatorJwtCode, message: string): OperatorJwtVerdict {
  return { ok: false, status, code, message };
}

/** jose's error, as a stable code; its messages name claims and algorithms, never the token's values. */
function refusalOf(err: unknown): OperatorJwtVerdict {
  const code = (err as { code?: unknown } | null)?.code;
  switch (code) {
    case 'ERR_JWT_EXPIRED':
      return refuse(401, OPERATOR_JWT_CODES.expired, 'the token has expired');
    case 'ERR_JWT_CLAIM_VALIDATION_FAILED': {
      const claim = String((err as { claim?: unknown }).claim ?? '');
      return refuse(401, OPERATOR_JWT_CODES.claimInvalid, `the token's "${claim}" claim is missing or not accepted`);
    }
    case 'ERR_JOSE_ALG_NOT_ALLOWED':
    case 'ERR_JOSE_NOT_SUPPORTED':
      return refuse(
        401,
        OPERATOR_JWT_CODES.algorithmNotAllowed,
        'the token is not signed with an accepted asymmetric algorithm',
      );
    case 'ERR_JWKS_NO_MATCHING_KEY':
    case 'ERR_JWKS_MULTIPLE_MATCHING_KEYS':
      return refuse(401, OPERATOR_JWT_CODES.keyUnknown, 'no key of the identity provider matches the token');
    case 'ERR_JWS_SIGNATURE_VERIFICATION_FAILED':
      return refuse(401, OPERATOR_JWT_CODES.signatureInvalid, 'the token signature does not verify');
    case 'ERR_JWS_INVALID':
    case 'ERR_JWT_INVALID':
      return refuse(401, OPERATOR_JWT_CODES.malformed, 'the bearer token is not a well-formed JWT');
    default:
      // A JWKS that cannot be fetched (timeout, refused, not 200, not a key set).
      return refuse(503, OPERATOR_JWT_CODES.keysUnavailable, 'the identity provider keys cannot be read now');
  }
}
