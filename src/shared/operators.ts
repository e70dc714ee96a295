import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { IdempotencyConfigError } from '../errors/errors.js';

/**
 * An operator of the confirmation endpoint: who answers, where, and the SHA-256 of the token
 * that says so. The token itself is never configured, only its digest.
 *
 * @example
 * const alice: Operator = { actor: 'alice', namespaces: ['acme/payments.*'], sha256: '9f86d0…' };
 */
export type Operator = {
  /** The actor the answers are recorded under (`answered_by`, the audit event's `actorId`). */
  actor: string;
  /**
   * The key namespaces whose requests this operator may answer (and see): an exact namespace
   * (`acme/payments.refund`), a prefix ending in `*` (`acme/payments.*`), or `*` for all.
   */
  namespaces: readonly string[];
  /** SHA-256 of the token, 64 hex characters. */
  sha256: string;
};

/** An operator with its digest as bytes, ready for the constant-time check. */
export type OperatorCredential = Operator & { digest: Buffer };

/** Prefix of the tokens `operators token` makes: a leaked one is recognisable in logs and scanners. */
export const OPERATOR_TOKEN_PREFIX = 'bqi_op_';
const MAX_ACTOR = 200;
const HEX_DIGEST = /^[0-9a-f]{64}$/;
const ACTOR = /^[^\s;,=]{1,200}$/;
// A namespace or a prefix of one; `;`, `,`, `=` and white space separate the configuration.
const NAMESPACE = /^(?:\*|[^\s;,=*]{1,200}\*?)$/;

/** Whether a text may be an operator's actor: 1 to 200 characters without white space, `;`, `,` or `=`. */
export function isOperatorActor(text: unknown): text is string {
  return typeof text === 'string' && ACTOR.test(text) && text.length <= MAX_ACTOR;
}

/** Whether a text is a namespace pattern: an exact namespace, a prefix ending in `*`, or `*`. */
export function isNamespacePattern(text: unknown): text is string {
  return typeof text === 'string' && NAMESPACE.test(text);
}

/** SHA-256 of a token, as bytes. */
export function tokenDigest(token: string): Buffer {
  return createHash('sha256').update(token, 'utf8').digest();
}

/**
 * A new operator token (32 random bytes, base64url, with the `bqi_op_` prefix) and the entry of
 * `BQI_OPERATORS` that names its digest. Show the token once, to its holder; configure the entry.
 *
 * @example
 * const { token, entry } = newOperatorToken({ actor: 'alice', namespaces: ['acme/payments.*'] });
 */
export function newOperatorToken(o: Pick<Operator, 'actor' | 'namespaces'>): {
  token: string;
  entry: string;
  operator: Operator;
} {
  const token = `${OPERATOR_TOKEN_PREFIX}${randomBytes(32).toString('base64url')}`;
  const operator = checkOperator({ ...o, sha256: tokenDigest(token).toString('hex') }, 'operator');
  return { token, entry: operatorEntry(operator), operator };
}

/** The `BQI_OPERATORS` entry of an operator: `actor=alice;namespaces=acme/payments.*,acme/refunds;sha256=<hex>`. */
export function operatorEntry(o: Operator): string {
  return `actor=${o.actor};namespaces=${o.namespaces.join(',')};sha256=${o.sha256}`;
}

/**
 * Parses `BQI_OPERATORS`: entries separated by white space (spaces or new lines), each
 * `actor=<id>;namespaces=<ns>[,<ns>…];sha256=<64 hex>` (fields in any order). An actor may hold
 * one entry per token (two entries of one actor: two tokens, e.g. during a rotation); a digest
 * appears once.
 *
 * @throws {@link IdempotencyConfigError} naming the entry (by its position, never its content)
 */
export function parseOperators(text: string): Operator[] {
  const entries = text.split(/\s+/).filter((e) => e.length > 0);
  const out = entries.map((entry, i) => {
    const where = `entry ${i + 1}`;
    const fields = new Map<string, string>();
    for (const part of entry.split(';')) {
      if (part === '') continue;
      const eq = part.indexOf('=');
      const name = eq > 0 ? part.slice(0, eq) : '';
      if (!['actor', 'namespaces', 'sha256'].includes(name) || fields.has(name)) {
        throw configError(`${where}: expected actor=<id>;namespaces=<ns>,…;sha256=<64 hex>, each field once`);
      }
      fields.set(name, part.slice(eq + 1));
    }
    return checkOperator(
      {
        actor: fields.get('actor') ?? '',
        namespaces: (fields.get('namespaces') ?? '').split(',').filter((n) => n !== ''),
        sha256: (fields.get('sha256') ?? '').toLowerCase(),
      },
      where,
    );
  });
  const seen = new Set<string>();
  for (const [i, o] of out.entries()) {
    if (seen.has(o.sha256)) throw configError(`entry ${i + 1}: the same sha256 as an earlier entry`);
    seen.add(o.sha256);
  }
  return out;
}

function checkOperator(o: Operator, where: string): Operator {
  if (!ACTOR.test(o.actor) || o.actor.length > MAX_ACTOR) {
    throw configError(`${where}: actor must be 1 to ${MAX_ACTOR} characters without white space, ";", "," or "="`);
  }
  if (o.namespaces.length === 0 || !o.namespaces.every((n) => NAMESPACE.test(n))) {
    throw configError(
      `${where}: namespaces must list at least one namespace, a prefix ending in "*" (acme/payments.*) or "*"`,
    );
  }
  if (!HEX_DIGEST.test(o.sha256)) {
    throw configError(
      `${where}: sha256 must be the 64 hex characters of the token's SHA-256 (see \`operators token\`)`,
    );
  }
  return { actor: o.actor, namespaces: [...o.namespaces], sha256: o.sha256 };
}

function configError(message: string): IdempotencyConfigError {
  return new IdempotencyConfigError(`BQI_OPERATORS: ${message}`, { option: 'operators' });
}

/** The operators with their digests as bytes. */
export function operatorCredentials(operators: readonly Operator[]): OperatorCredential[] {
  return operators.map((o) => ({ ...checkOperator(o, `operator ${o.actor}`), digest: Buffer.from(o.sha256, 'hex') }));
}

/**
 * The operator whose token this is, or undefined. Every configured digest is compared, in
 * constant time, whichever matches: neither the answer's time nor its comparison tells which
 * entry (or how much of a token) was right.
 */
export function operatorOfToken(
  token: string,
  operators: readonly OperatorCredential[],
): OperatorCredential | undefined {
  const given = tokenDigest(token);
  let found: OperatorCredential | undefined;
  for (const o of operators) {
    if (timingSafeEqual(given, o.digest) && found === undefined) found = o;
  }
  return found;
}

/**
 * The namespace of a stored operation key (its first, percent-encoded part), or undefined when the
 * key does not show it whole (a bounded key cut inside its namespace): then only `*` covers it.
 */
export function namespaceOfKey(operationKey: string): string | undefined {
  const colon = operationKey.indexOf(':');
  const hash = operationKey.indexOf('#');
  if (colon <= 0 || (hash >= 0 && hash < colon)) return undefined;
  try {
    return decodeURIComponent(operationKey.slice(0, colon));
  } catch {
    return undefined;
  }
}

/** Whether an operator may answer (and see) the requests of this operation key. */
export function mayAnswer(operator: Pick<Operator, 'namespaces'>, operationKey: string): boolean {
  if (operator.namespaces.includes('*')) return true;
  const ns = namespaceOfKey(operationKey);
  if (ns === undefined) return false;
  return operator.namespaces.some((p) => (p.endsWith('*') ? ns.startsWith(p.slice(0, -1)) : ns === p));
}
