import { IdempotencyConfigError } from '../errors/errors.js';
import { checkOperatorJwt, type OperatorJwtOptions, parseOperatorJwks } from '../shared/operator-jwt.js';
import { type Operator, tokenDigest } from '../shared/operators.js';
import { ConfigError } from './errors.js';

/**
 * Who may answer confirmations and open the console, from the variables that name them: the
 * deprecated shared `BQI_CONFIRM_TOKEN` folded into the operators, and the `BQI_OPERATOR_JWT_*`
 * variables read as one set. Apart from `env.ts` because these read several variables together
 * and refuse combinations, where every other variable is checked alone.
 */

/**
 * The operators of the confirmation endpoint: `BQI_OPERATORS`, and the deprecated shared
 * `BQI_CONFIRM_TOKEN` as one operator of every namespace, named by `BQI_CONFIRM_ACTOR` (required
 * with it: an answer is recorded under an actor the configuration names, never the caller's say).
 */
export function confirmOperators(
  operators: Operator[] | undefined,
  token: string | undefined,
  actor: string | undefined,
): { operators?: Operator[]; sharedConfirmToken?: boolean } {
  if (token === undefined) {
    if (actor !== undefined) {
      throw new ConfigError([{ variable: 'BQI_CONFIRM_ACTOR', message: 'is only read with BQI_CONFIRM_TOKEN' }]);
    }
    return operators ? { operators } : {};
  }
  if (actor === undefined) {
    throw new ConfigError([
      {
        variable: 'BQI_CONFIRM_TOKEN',
        message:
          'needs BQI_CONFIRM_ACTOR (the actor its answers are recorded under); better, replace both by BQI_OPERATORS: one token per operator, made by `bullmq-idempotency operators token`',
      },
    ]);
  }
  const shared: Operator = { actor, namespaces: ['*'], sha256: tokenDigest(token).toString('hex') };
  return { operators: [...(operators ?? []), shared], sharedConfirmToken: true };
}

const JWT_VARIABLES = [
  'BQI_OPERATOR_JWT_ISSUER',
  'BQI_OPERATOR_JWT_AUDIENCE',
  'BQI_OPERATOR_JWKS_URL',
  'BQI_OPERATOR_JWKS',
  'BQI_OPERATOR_JWT_PUBLIC_KEY',
  'BQI_OPERATOR_JWT_ACTOR_CLAIM',
  'BQI_OPERATOR_JWT_NAMESPACES_CLAIM',
  'BQI_OPERATOR_JWT_NAMESPACE_PREFIX',
  'BQI_OPERATOR_JWT_ALGORITHMS',
] as const;

/** The operator JWTs of the `BQI_OPERATOR_JWT_*` variables, checked; none when none is set. */
export function operatorJwtOf(e: { [V in (typeof JWT_VARIABLES)[number]]?: string | undefined }): {
  operatorJwt?: OperatorJwtOptions;
} {
  if (JWT_VARIABLES.every((v) => e[v] === undefined)) return {};
  const list = (v: string | undefined) =>
    (v ?? '')
      .split(',')
      .map((s) => s.trim())
      .filter((s) => s !== '');
  try {
    const jwt: OperatorJwtOptions = {
      issuer: list(e.BQI_OPERATOR_JWT_ISSUER),
      audience: list(e.BQI_OPERATOR_JWT_AUDIENCE),
      ...(e.BQI_OPERATOR_JWKS_URL === undefined ? {} : { jwksUrl: e.BQI_OPERATOR_JWKS_URL }),
      ...(e.BQI_OPERATOR_JWKS === undefined ? {} : { jwks: parseOperatorJwks(e.BQI_OPERATOR_JWKS) }),
      ...(e.BQI_OPERATOR_JWT_PUBLIC_KEY === undefined ? {} : { publicKey: e.BQI_OPERATOR_JWT_PUBLIC_KEY }),
      ...(e.BQI_OPERATOR_JWT_ACTOR_CLAIM === undefined ? {} : { actorClaim: e.BQI_OPERATOR_JWT_ACTOR_CLAIM }),
      ...(e.BQI_OPERATOR_JWT_NAMESPACES_CLAIM === undefined
        ? {}
        : { namespacesClaim: e.BQI_OPERATOR_JWT_NAMESPACES_CLAIM }),
      ...(e.BQI_OPERATOR_JWT_NAMESPACE_PREFIX === undefined
        ? {}
        : { namespacePrefix: e.BQI_OPERATOR_JWT_NAMESPACE_PREFIX }),
      ...(e.BQI_OPERATOR_JWT_ALGORITHMS === undefined ? {} : { algorithms: list(e.BQI_OPERATOR_JWT_ALGORITHMS) }),
    };
    checkOperatorJwt(jwt);
    return { operatorJwt: jwt };
  } catch (err) {
    if (!(err instanceof IdempotencyConfigError)) throw err;
    // The messages name the option and what is wrong, never a key.
    throw new ConfigError([{ variable: 'BQI_OPERATOR_JWT_*', message: err.message.replace(/^operator JWTs: /, '') }]);
  }
}
