import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { errorLabel } from '../errors/clean-name.js';
import { ERROR_CODES, IdempotencyError } from '../errors/idempotency-error.js';
import type { Logger } from '../shared/logger.js';

/** What a route answers: a status, a body (an object is sent as JSON) and extra headers. */
export type HttpReply = {
  status: number;
  body?: string | Buffer | Record<string, unknown> | unknown[];
  headers?: Record<string, string>;
};

export type HttpMethod = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

/**
 * One entry of the route table: an exact path and a method. A `GET` route answers `HEAD` too.
 * Throw an {@link HttpError} for a 4xx answer; any other error is a 500 logged by its code.
 *
 * @example
 * server.route({ method: 'GET', path: '/version', handle: () => ({ status: 200, body: { version: '1' } }) });
 */
export type HttpRoute = {
  method: HttpMethod;
  /** The exact path, without query string: `/healthz`. */
  path: string;
  handle(req: IncomingMessage, url: URL): HttpReply | Promise<HttpReply>;
};

/** An answer other than 2xx, thrown by a route: its status and a short public message. */
export class HttpError extends IdempotencyError<typeof ERROR_CODES.httpStatus> {
  readonly status: number;
  readonly headers: Record<string, string>;

  constructor(status: number, message: string, headers: Record<string, string> = {}) {
    super(ERROR_CODES.httpStatus, message, { status, headers });
    this.status = status;
    this.headers = headers;
  }
}

/** Largest request body {@link readBody} accepts by default. */
export const DEFAULT_MAX_BODY_BYTES = 64 * 1024;

/**
 * The request body, refused with a 413 {@link HttpError} past `maxBytes` (the connection is not
 * read further).
 */
export async function readBody(req: IncomingMessage, maxBytes = DEFAULT_MAX_BODY_BYTES): Promise<Buffer> {
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > maxBytes) throw new HttpError(413, `body over ${maxBytes} bytes`);
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > maxBytes) throw new HttpError(413, `body over ${maxBytes} bytes`);
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

/** A handler that answers a whole path prefix itself, writing the response (node:http style). */
export type HttpMountHandler = (req: IncomingMessage, res: ServerResponse) => Promise<void>;

/** The address the HTTP server listens on when none is given: loopback only. */
export const DEFAULT_HTTP_HOST = '127.0.0.1';

export type OpsHttpServerOptions = { routes?: HttpRoute[]; logger?: Logger };

/**
 * A small HTTP server on `node:http` with a route table (exact path and method): the operations
 * process serves `/healthz`, `/readyz` and `/metrics` on it, and more routes can be mounted with
 * {@link OpsHttpServer.route} and whole path prefixes with {@link OpsHttpServer.mount}, before
 * or after `listen()`. Unknown paths get 404, known paths
 * with another method 405 and an `Allow` header. Bodies are JSON unless a route says otherwise.
 */
export class OpsHttpServer {
  private readonly routes = new Map<string, Map<HttpMethod, HttpRoute>>();
  private readonly mounts: { base: string; handler: HttpMountHandler }[] = [];
  private server: Server | undefined;
  private readonly logger: Logger | undefined;

  constructor(options: OpsHttpServerOptions = {}) {
    this.logger = options.logger;
    for (const r of options.routes ?? []) this.route(r);
  }

  /** Adds a route; a second route for the same method and path is refused. */
  route(route: HttpRoute): this {
    const byMethod = this.routes.get(route.path) ?? new Map<HttpMethod, HttpRoute>();
    if (byMethod.has(route.method)) throw new Error(`a ${route.method} route for ${route.path} is already mounted`);
    byMethod.set(route.method, route);
    this.routes.set(route.path, byMethod);
    return this;
  }

  /**
   * Hands every request for `base` or below it (`/confirmations`, `/confirmations/cf-1`, any
   * method) to `handler`, which writes the response itself; routes of the table win for their
   * exact paths. A handler that throws before answering gets a 500.
   *
   * @example
   * server.mount('/confirmations', confirmationHttpHandler({ pool, token }));
   */
  mount(base: string, handler: HttpMountHandler): this {
    const clean = base.replace(/\/+$/, '');
    if (!clean.startsWith('/')) throw new Error(`a mount point must start with "/": ${base}`);
    if (this.mounts.some((m) => m.base === clean)) throw new Error(`${clean} is already mounted`);
    this.mounts.push({ base: clean, handler });
    return this;
  }

  /** The address listened on (after `listen()`), e.g. to log the port chosen for port 0. */
  get address(): AddressInfo | undefined {
    const a = this.server?.address();
    return a && typeof a === 'object' ? a : undefined;
  }

  /**
   * Listens on `port` (0: any free port) and `host`; rejects when the address is taken. Loopback
   * unless told otherwise: probes, metrics and confirmations are for this machine (or a sidecar)
   * until `host` (`BQI_HTTP_HOST`) says `0.0.0.0` or another interface.
   * @defaultValue host `'127.0.0.1'`
   */
  async listen(port: number, host = DEFAULT_HTTP_HOST): Promise<AddressInfo> {
    const server = createServer((req, res) => void this.dispatch(req, res));
    // A scraper or probe that keeps its connection idle must not hold up a shutdown for long.
    server.keepAliveTimeout = 5_000;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, () => {
        server.off('error', reject);
        resolve();
      });
    });
    server.on('error', (err) => this.logger?.error({ err: errorLabel(err) }, 'HTTP server error'));
    this.server = server;
    return this.address as AddressInfo;
  }

  /** Stops listening and closes every open connection. */
  async close(): Promise<void> {
    const server = this.server;
    if (!server) return;
    this.server = undefined;
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
  }

  private async dispatch(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://localhost');
    const method = (req.method ?? 'GET').toUpperCase();
    const mount = this.routes.has(url.pathname)
      ? undefined
      : this.mounts.find((m) => url.pathname === m.base || url.pathname.startsWith(`${m.base}/`));
    if (mount) {
      try {
        await mount.handler(req, res);
      } catch (err) {
        this.logger?.warn({ path: mount.base, err: errorLabel(err) }, 'HTTP handler failed');
        if (!res.headersSent) send(res, { status: 500, body: { error: 'internal error' } }, false);
        else res.destroy();
      }
      return;
    }
    let reply: HttpReply;
    try {
      reply = await this.answer(req, url, method);
    } catch (err) {
      if (err instanceof HttpError) {
        reply = { status: err.status, body: { error: err.message }, headers: err.headers };
      } else {
        this.logger?.warn({ path: url.pathname, err: errorLabel(err) }, 'HTTP route failed');
        reply = { status: 500, body: { error: 'internal error' } };
      }
    }
    send(res, reply, method === 'HEAD');
  }

  private answer(req: IncomingMessage, url: URL, method: string): HttpReply | Promise<HttpReply> {
    const byMethod = this.routes.get(url.pathname);
    if (!byMethod) throw new HttpError(404, 'not found');
    const route = byMethod.get((method === 'HEAD' ? 'GET' : method) as HttpMethod);
    if (!route) {
      const allow = [...byMethod.keys()].flatMap((m) => (m === 'GET' ? ['GET', 'HEAD'] : [m])).join(', ');
      throw new HttpError(405, 'method not allowed', { allow });
    }
    return route.handle(req, url);
  }
}

function send(res: ServerResponse, reply: HttpReply, headOnly: boolean): void {
  const { body } = reply;
  const json = body !== undefined && typeof body !== 'string' && !Buffer.isBuffer(body);
  const payload = body === undefined ? '' : json ? `${JSON.stringify(body)}\n` : body;
  const headers: Record<string, string | number> = {
    'cache-control': 'no-store',
    ...(json ? { 'content-type': 'application/json; charset=utf-8' } : {}),
    ...reply.headers,
    'content-length': Buffer.byteLength(payload),
  };
  res.writeHead(reply.status, headers);
  res.end(headOnly ? undefined : payload);
}
