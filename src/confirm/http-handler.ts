import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { IdempotencyConfigError } from '../errors/errors.js';
import { ERROR_CODES, isIdempotencyError } from '../errors/idempotency-error.js';
import { type AnswerConfirmationOptions, answerConfirmation, listConfirmations } from './answer.js';
import { ConfirmationStore } from './confirmation-store.js';
import { confirmationView } from './view.js';

/** Shortest bearer token the endpoint accepts as its configuration. */
export const MIN_CONFIRMATION_TOKEN_LENGTH = 32;
const MAX_BODY_BYTES = 16 * 1024;

export type ConfirmationHttpOptions = Pick<AnswerConfirmationOptions, 'pool' | 'schema' | 'auditStore' | 'queue'> & {
  /** The bearer token callers send (`Authorization: Bearer …`); at least 32 characters. */
  token: string;
  /** Path the routes live under. @defaultValue `'/confirmations'` */
  basePath?: string;
};

/** A request handler for node:http (and anything that passes node's request and response). */
export type ConfirmationHttpHandler = (req: IncomingMessage, res: ServerResponse) => Promise<void>;

const STATUS_OF: Record<string, number> = {
  [ERROR_CODES.confirmationNotFound]: 404,
  [ERROR_CODES.confirmationAnswered]: 409,
  [ERROR_CODES.confirmationTimedOut]: 410,
  [ERROR_CODES.invalidInput]: 400,
};

/**
 * The HTTP side of confirmations, for a chat tool or a web page: every route needs
 * `Authorization: Bearer <token>` (compared in constant time, as SHA-256 digests).
 *
 * - `GET  <base>?pending=true` — the requests (details stay sealed);
 * - `GET  <base>/<id>` — one request;
 * - `POST <base>/<id>` with `{"decision": "approve" | "deny", "actor": "alice", "reason": "…"}` — the
 *   answer, recorded once and audited like the CLI's (`via: http`): 200, or 409 for a different
 *   answer already recorded, 410 after the timeout, 404 for an unknown id; errors carry `code`.
 *
 * @example
 * const handle = confirmationHttpHandler({ pool, token: process.env.BQI_CONFIRM_TOKEN ?? '' });
 * createServer((req, res) => void handle(req, res)).listen(8080);
 */
export function confirmationHttpHandler(opts: ConfirmationHttpOptions): ConfirmationHttpHandler {
  if (typeof opts.token !== 'string' || opts.token.length < MIN_CONFIRMATION_TOKEN_LENGTH) {
    throw new IdempotencyConfigError(
      `the confirmation endpoint's token must be at least ${MIN_CONFIRMATION_TOKEN_LENGTH} characters`,
      { option: 'token' },
    );
  }
  const expected = digest(opts.token);
  const base = (opts.basePath ?? '/confirmations').replace(/\/+$/, '');
  const store = new ConfirmationStore(opts.pool, opts.schema);
  return async (req, res) => {
    try {
      if (!authorized(req.headers.authorization, expected)) {
        return send(res, 401, { code: 'UNAUTHORIZED', message: 'a valid bearer token is required' }, true);
      }
      const url = new URL(req.url ?? '/', 'http://localhost');
      const rest = url.pathname.startsWith(base) ? url.pathname.slice(base.length) : undefined;
      if (rest === '' || rest === '/') {
        if (req.method !== 'GET') return send(res, 405, { code: 'METHOD_NOT_ALLOWED', message: 'GET only' });
        const list = await listConfirmations({
          pool: opts.pool,
          ...(opts.schema ? { schema: opts.schema } : {}),
          pending: url.searchParams.get('pending') === 'true',
          limit: 100,
          ...(url.searchParams.get('after') ? { after: url.searchParams.get('after') as string } : {}),
        });
        return send(res, 200, { confirmations: list.map(confirmationView) });
      }
      const id = rest?.match(/^\/(cf-[0-9]+)$/)?.[1];
      if (!id) return send(res, 404, { code: 'NOT_FOUND', message: 'no such route' });
      if (req.method === 'GET') return send(res, 200, { confirmation: confirmationView(await store.get(id)) });
      if (req.method !== 'POST') return send(res, 405, { code: 'METHOD_NOT_ALLOWED', message: 'GET or POST' });
      const body = await readJson(req);
      if (!body.ok) return send(res, body.status, { code: body.code, message: body.message });
      const { decision, actor, reason } = body.value as { decision?: unknown; actor?: unknown; reason?: unknown };
      if ((decision !== 'approve' && decision !== 'deny') || typeof actor !== 'string' || typeof reason !== 'string') {
        return send(res, 400, {
          code: ERROR_CODES.invalidInput,
          message: 'expected {"decision": "approve" | "deny", "actor": string, "reason": string}',
        });
      }
      const r = await answerConfirmation({
        pool: opts.pool,
        ...(opts.schema ? { schema: opts.schema } : {}),
        ...(opts.auditStore ? { auditStore: opts.auditStore } : {}),
        ...(opts.queue ? { queue: opts.queue } : {}),
        id,
        approve: decision === 'approve',
        actor,
        comment: reason,
        via: 'http',
      });
      return send(res, 200, {
        confirmation: confirmationView(r.confirmation),
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

function digest(text: string): Buffer {
  return createHash('sha256').update(text, 'utf8').digest();
}

/** Bearer token check on equal-length digests, so neither the comparison nor the length tells anything. */
function authorized(header: string | undefined, expected: Buffer): boolean {
  const m = /^Bearer (.+)$/i.exec(header ?? '');
  const given = digest(m?.[1]?.trim() ?? '');
  return timingSafeEqual(given, expected) && m !== null;
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
