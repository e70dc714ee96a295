import type { IncomingMessage, ServerResponse } from 'node:http';
import { IdempotencyConfigError } from '../errors/errors.js';
import { ERROR_CODES, isIdempotencyError } from '../errors/idempotency-error.js';
import { DEFAULT_REDACTION_POLICY, type RedactionPolicy } from '../redaction/define-policy.js';
import type { Logger } from '../shared/logger.js';
import type { OperatorJwtOptions } from '../shared/operator-jwt.js';
import {
  mayAnswer,
  type Operator,
  type OperatorCredential,
  operatorCredentials,
  operatorOfToken,
  tokenDigest,
} from '../shared/operators.js';
import { actorIdAsTold } from './actor-id.js';
import { type AnswerConfirmationOptions, answerConfirmation, listConfirmations } from './answer.js';
import { ConfirmationStore } from './confirmation-store.js';
import { type JwtOperator, looksLikeJwt, OPERATOR_JWT_CODES, operatorJwtVerifier } from './operator-jwt.js';
import type { Confirmation } from './types.js';
import { confirmationView } from './view.js';

/** Shortest shared token (the deprecated `token` option) the endpoint accepts as its configuration. */
export const MIN_CONFIRMATION_TOKEN_LENGTH = 32;
const MAX_BODY_BYTES = 16 * 1024;
const LIST_PAGE = 100;

export type ConfirmationHttpOptions = Pick<AnswerConfirmationOptions, 'pool' | 'schema' | 'auditStore' | 'queue'> & {
  /**
   * Who may call, each by a token of their own (`Authorization: Bearer <token>`): the answer is
   * recorded under the operator's `actor`, and only for the namespaces it lists (see
   * `parseOperators` for `BQI_OPERATORS`, `newOperatorToken` to make one).
   */
  operators?: readonly Operator[];
  /**
   * Operators identified by JWTs of an identity provider (`Authorization: Bearer <JWT>`): verified
   * (signature by a key of its JWKS, issuer, audience, expiry); the actor is the token's
   * `actorClaim` (`sub`), its namespaces its `namespacesClaim` (`bqi_namespaces`). Beside
   * `operators`, or alone.
   */
  jwt?: OperatorJwtOptions;
  /**
   * @deprecated One token shared by all callers, at least 32 characters: with `actor`, an operator
   * of every namespace. Give each person an entry of `operators` instead.
   */
  token?: string;
  /** @deprecated With `token`: the actor its answers are recorded under. Required with it. */
  actor?: string;
  /**
   * The policy whose keys make an actor's reference when it is not an identifier: the one of
   * `auditStore` (the emitters'), so the endpoint shows what the trail holds.
   * @defaultValue DEFAULT_REDACTION_POLICY
   */
  policy?: RedactionPolicy;
  /** Receives a warning for every refused answer (the operator, the request, why). */
  logger?: Logger;
  /** Path the routes live under. @defaultValue `'/confirmations'` */
  basePath?: string;
};

/** A request handler for node:http (and anything that passes node's request and response). */
export type ConfirmationHttpHandler = (req: IncomingMessage, res: ServerResponse) => Promise<void>;

/** Stable codes of the endpoint's own refusals (the library's errors keep their `IDEMPOTENCY_*` codes). */
export const CONFIRMATION_HTTP_CODES = {
  unauthorized: 'UNAUTHORIZED',
  /** A JWT refused: expired, wrong issuer or audience, unknown key, refused algorithm, bad signature (401; 503 when the keys cannot be read). */
  jwt: OPERATOR_JWT_CODES,
  /** The request belongs to a namespace the token's operator may not answer (403). */
  namespaceNotAllowed: 'NAMESPACE_NOT_ALLOWED',
  /** The body names an actor: the actor is the token's operator, never the caller's say (400). */
  actorNotAccepted: 'ACTOR_NOT_ACCEPTED',
} as const;

const STATUS_OF: Record<string, number> = {
  [ERROR_CODES.confirmationNotFound]: 404,
  [ERROR_CODES.confirmationAnswered]: 409,
  [ERROR_CODES.confirmationTimedOut]: 410,
  [ERROR_CODES.invalidInput]: 400,
};

/**
 * The HTTP side of confirmations, for a chat tool or a web page. Every route needs
 * `Authorization: Bearer <token>`: the token of one operator (digests compared in constant time),
 * or with `jwt` a JWT of the identity provider (verified; its claims name the actor and the
 * namespaces). The operator is who answers, and sees and answers only the requests of its
 * namespaces. A refused JWT is 401 with its own code (`TOKEN_EXPIRED`, `TOKEN_CLAIM_INVALID`,
 * `TOKEN_KEY_UNKNOWN`, `TOKEN_ALGORITHM_NOT_ALLOWED`, `TOKEN_SIGNATURE_INVALID`,
 * `TOKEN_MALFORMED`), or 503 `TOKEN_KEYS_UNAVAILABLE` when the JWKS cannot be read.
 *
 * - `GET  <base>?pending=true[&after=cf-12]` — the requests of the operator's namespaces (details
 *   stay sealed); `next` when more may follow;
 * - `GET  <base>/<id>` — one request (403 outside the operator's namespaces);
 * - `POST <base>/<id>` with `{"decision": "approve" | "deny", "reason": "…"}` — the answer, recorded
 *   once under the operator's actor and audited like the CLI's (`via: http`): 200, or 409 for a
 *   different answer already recorded, 410 after the timeout, 404 for an unknown id, 403
 *   (`NAMESPACE_NOT_ALLOWED`) outside the operator's namespaces, 400 (`ACTOR_NOT_ACCEPTED`) for a
 *   body that names an `actor`; errors carry `code`.
 *
 * @example
 * const handle = confirmationHttpHandler({ pool, operators: parseOperators(process.env.BQI_OPERATORS ?? '') });
 * createServer((req, res) => void handle(req, res)).listen(8080, '127.0.0.1');
 */
export function confirmationHttpHandler(opts: ConfirmationHttpOptions): ConfirmationHttpHandler {
  const operators = credentialsOf(opts);
  const verifyJwt = opts.jwt ? operatorJwtVerifier(opts.jwt) : undefined;
  const policy = opts.policy ?? DEFAULT_REDACTION_POLICY;
  const base = (opts.basePath ?? '/confirmations').replace(/\/+$/, '');
  const store = new ConfirmationStore(opts.pool, opts.schema);
  const view = (c: Confirmation) => confirmationView(c, policy);
  return async (req, res) => {
    try {
      const bearer = /^Bearer (.+)$/i.exec(req.headers.authorization ?? '')?.[1]?.trim();
      const named = operatorOfToken(bearer ?? '', operators);
      let operator: JwtOperator | undefined = bearer === undefined ? undefined : named;
      if (!operator && bearer !== undefined && verifyJwt && looksLikeJwt(bearer)) {
        const verdict = await verifyJwt(bearer);
        if (!verdict.ok) {
          opts.logger?.warn({ code: verdict.code }, 'operator token refused');
          return send(res, verdict.status, { code: verdict.code, message: verdict.message }, verdict.status === 401);
        }
        operator = verdict.operator;
      }
      if (!operator) {
        return send(res, 401, { code: 'UNAUTHORIZED', message: 'a valid bearer token is required' }, true);
      }
      const url = new URL(req.url ?? '/', 'http://localhost');
      const rest = url.pathname.startsWith(base) ? url.pathname.slice(base.length) : undefined;
      if (rest === '' || rest === '/') {
        if (req.method !== 'GET') return send(res, 405, { code: 'METHOD_NOT_ALLOWED', message: 'GET only' });
        const page = await listConfirmations({
          pool: opts.pool,
          ...(opts.schema ? { schema: opts.schema } : {}),
          pending: url.searchParams.get('pending') === 'true',
          limit: LIST_PAGE,
          ...(url.searchParams.get('after') ? { after: url.searchParams.get('after') as string } : {}),
        });
        // Another namespace's requests are not this operator's to see; a full page may have more after it.
        const next = page.length === LIST_PAGE ? page.at(-1)?.id : undefined;
        return send(res, 200, {
          confirmations: page.filter((c) => mayAnswer(operator, c.operationKey)).map(view),
          ...(next ? { next } : {}),
        });
      }
      const id = rest?.match(/^\/(cf-[0-9]+)$/)?.[1];
      if (!id) return send(res, 404, { code: 'NOT_FOUND', message: 'no such route' });
      if (req.method !== 'GET' && req.method !== 'POST') {
        return send(res, 405, { code: 'METHOD_NOT_ALLOWED', message: 'GET or POST' });
      }
      const current = await store.get(id);
      if (!mayAnswer(operator, current.operationKey)) {
        if (req.method === 'POST') {
          opts.logger?.warn(
            { confirmation: id, operation: current.operation, actor: actorIdAsTold(operator.actor, policy) },
            'confirmation answer refused: the request is outside the operator namespaces',
          );
        }
        return send(res, 403, {
          code: CONFIRMATION_HTTP_CODES.namespaceNotAllowed,
          message: `${id} belongs to a namespace this token may not answer`,
        });
      }
      if (req.method === 'GET') return send(res, 200, { confirmation: view(current) });
      const body = await readJson(req);
      if (!body.ok) return send(res, body.status, { code: body.code, message: body.message });
      const value = body.value as { decision?: unknown; actor?: unknown; reason?: unknown } | null;
      if (value !== null && typeof value === 'object' && 'actor' in value) {
        return send(res, 400, {
          code: CONFIRMATION_HTTP_CODES.actorNotAccepted,
          message: 'the actor is the operator of the bearer token: remove "actor" from the body',
        });
      }
      const { decision, reason } = value ?? {};
      if ((decision !== 'approve' && decision !== 'deny') || typeof reason !== 'string') {
        return send(res, 400, {
          code: ERROR_CODES.invalidInput,
          message: 'expected {"decision": "approve" | "deny", "reason": string}',
        });
      }
      const r = await answerConfirmation({
        pool: opts.pool,
        ...(opts.schema ? { schema: opts.schema } : {}),
        ...(opts.auditStore ? { auditStore: opts.auditStore } : {}),
        ...(opts.queue ? { queue: opts.queue } : {}),
        policy,
        id,
        approve: decision === 'approve',
        actor: operator.actor,
        comment: reason,
        via: 'http',
      });
      return send(res, 200, {
        confirmation: view(r.confirmation),
        recorded: r.recorded,
        auditEventId: r.auditEventId,
        woken: r.woken,
      });
    } catch (err) {
      const status = isIdempotencyError(err) ? STATUS_OF[err.code] : undefined;
      if (status && isIdempotencyError(err)) return send(res, status, { code: err.code, message: err.message });
      return send(res, 500, { code: 'INTERNAL', message: 'the answer could not be handled' });
    }
  };
}

/** The operators of the options: `operators`, and the deprecated shared `token` as one more. */
function credentialsOf(opts: ConfirmationHttpOptions): OperatorCredential[] {
  const all: Operator[] = [...(opts.operators ?? [])];
  if (opts.token !== undefined) {
    if (typeof opts.token !== 'string' || opts.token.length < MIN_CONFIRMATION_TOKEN_LENGTH) {
      throw new IdempotencyConfigError(
        `the confirmation endpoint's token must be at least ${MIN_CONFIRMATION_TOKEN_LENGTH} characters`,
        { option: 'token' },
      );
    }
    if (typeof opts.actor !== 'string' || opts.actor.trim() === '') {
      throw new IdempotencyConfigError(
        'a shared token needs `actor`, the actor its answers are recorded under (better: one entry of `operators` per person)',
        { option: 'actor' },
      );
    }
    all.push({ actor: opts.actor.trim(), namespaces: ['*'], sha256: tokenDigest(opts.token).toString('hex') });
  }
  if (all.length === 0 && opts.jwt === undefined) {
    throw new IdempotencyConfigError('the confirmation endpoint needs at least one operator (`operators` or `jwt`)', {
      option: 'operators',
    });
  }
  return operatorCredentials(all);
}

type Body = { ok: true; value: unknown } | { ok: false; status: number; code: string; message: string };

async function readJson(req: IncomingMessage): Promise<Body> {
  if (!/^application\/json\b/i.test(req.headers['content-type'] ?? '')) {
    return { ok: false, status: 415, code: 'UNSUPPORTED_MEDIA_TYPE', message: 'send application/json' };
  }
  const chunks: Buffer[] = [];
  let bytes = 0;
  for await (const chunk of req) {
    bytes += (chunk as Buffer).length;
    if (bytes > MAX_BODY_BYTES) {
      return { ok: false, status: 413, code: 'PAYLOAD_TOO_LARGE', message: `at most ${MAX_BODY_BYTES} bytes` };
    }
    chunks.push(chunk as Buffer);
  }
  try {
    return { ok: true, value: JSON.parse(Buffer.concat(chunks).toString('utf8')) };
  } catch {
    return { ok: false, status: 400, code: ERROR_CODES.invalidInput, message: 'the body is not JSON' };
  }
}

function send(res: ServerResponse, status: number, body: unknown, challenge = false): void {
  res.statusCode = status;
  res.setHeader('content-type', 'application/json; charset=utf-8');
  res.setHeader('cache-control', 'no-store');
  if (challenge) res.setHeader('www-authenticate', 'Bearer');
  res.end(JSON.stringify(body));
}
