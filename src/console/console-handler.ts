import type { IncomingMessage, ServerResponse } from 'node:http';
import { errorLabel } from '../errors/clean-name.js';
import { IdempotencyConfigError } from '../errors/errors.js';
import { type Operator, operatorCredentials, operatorOfToken } from '../shared/operators.js';
import {
  ACTIONS,
  type ActionForm,
  asRefusal,
  CONSOLE_CODES,
  ConsoleRefusal,
  openSealed,
  recordFor,
} from './actions.js';
import type { ConsoleDeps, ConsoleOperation } from './deps.js';
import { html, type Markup, page } from './html.js';
import { type InboxOrder, readInbox, renderInbox } from './inbox.js';
import { readOperation, renderOperation } from './operation-page.js';
import { MAX_QUERY, renderSearch, search } from './search.js';
import { formId, once, overHttps, type Session, Sessions, sameOrigin, sessionCookie, validCsrf } from './session.js';

const MAX_FORM_BYTES = 64 * 1024;

export type ConsoleOptions = Omit<ConsoleDeps, 'decrypt' | 'operations' | 'base'> & {
  /** Who may sign in, each with a token of their own: the console acts as them, in their namespaces only. */
  operators: readonly Operator[];
  /** Actors of `operators` who may open sealed values (each opening audited). @defaultValue none */
  decrypt?: readonly string[];
  /** Operations whose result schema checks a result given to resolve an unknown one. */
  operations?: readonly ConsoleOperation[];
  /** Where the console is mounted. @defaultValue `'/console'` */
  basePath?: string;
  /**
   * Origins a form may be posted from besides the host the request names (the public origin
   * behind a proxy that rewrites `Host`, e.g. `https://ops.example.com`).
   */
  origins?: readonly string[];
  sessionIdleMs?: number;
};

/** A request handler for node:http, mounted by the operations process at `/console`. */
export type ConsoleHandler = (req: IncomingMessage, res: ServerResponse) => Promise<void>;

/** Headers of every console response: no caching, no framing, no scripts, no referrer. */
const SECURITY_HEADERS: Record<string, string> = {
  'cache-control': 'no-store',
  'content-security-policy':
    "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
  'x-frame-options': 'DENY',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'same-origin',
};

function send(res: ServerResponse, status: number, body: string, headers: Record<string, string> = {}): void {
  res.writeHead(status, { ...SECURITY_HEADERS, 'content-type': 'text/html; charset=utf-8', ...headers });
  res.end(body);
}

function redirect(res: ServerResponse, to: string, headers: Record<string, string> = {}): void {
  res.writeHead(303, { ...SECURITY_HEADERS, location: to, ...headers });
  res.end();
}

async function readForm(req: IncomingMessage): Promise<ActionForm> {
  if (!/^application\/x-www-form-urlencoded\b/i.test(req.headers['content-type'] ?? '')) {
    throw new ConsoleRefusal(415, CONSOLE_CODES.badRequest, 'send a form (application/x-www-form-urlencoded)');
  }
  const chunks: Buffer[] = [];
  let bytes = 0;
  for await (const chunk of req) {
    bytes += (chunk as Buffer).length;
    if (bytes > MAX_FORM_BYTES) throw new ConsoleRefusal(413, CONSOLE_CODES.badRequest, 'the form is too large');
    chunks.push(chunk as Buffer);
  }
  const form: ActionForm = {};
  for (const [k, v] of new URLSearchParams(Buffer.concat(chunks).toString('utf8'))) form[k] ??= v;
  return form;
}

/**
 * The operator console (docs/console.md): server-rendered pages behind a sign-in with an
 * operator's token. Every action goes through the library's own functions, as the signed-in
 * operator, within its namespaces; every form carries the session's anti-forgery token and a
 * one-time id (a repeated submit is answered with the first outcome) and must come from the
 * console's own origin.
 *
 * @example
 * server.mount('/console', consoleHandler({ pool, schema, ledger, store, policy, queue, operators }));
 */
export function consoleHandler(opts: ConsoleOptions): ConsoleHandler {
  if (opts.operators.length === 0) {
    throw new IdempotencyConfigError('the console needs at least one operator (BQI_OPERATORS)', {
      option: 'operators',
    });
  }
  const credentials = operatorCredentials(opts.operators);
  const base = (opts.basePath ?? '/console').replace(/\/+$/, '');
  const deps: ConsoleDeps = {
    ...opts,
    base,
    decrypt: new Set(opts.decrypt ?? []),
    operations: new Map((opts.operations ?? []).map((o) => [o.name, o])),
  };
  const sessions = new Sessions(opts.sessionIdleMs);
  const origins = opts.origins ?? [];

  const show = (
    res: ServerResponse,
    status: number,
    s: Session | undefined,
    title: string,
    body: Markup,
    extra = {},
  ) => {
    const flash = s?.flash;
    if (s) delete s.flash;
    send(
      res,
      status,
      page(
        {
          title,
          base,
          ...(s ? { actor: s.operator.actor, csrf: s.csrf } : {}),
          ...(flash && !flash.error ? { flash: flash.text } : {}),
          ...(flash?.error ? { error: flash.text } : {}),
          ...extra,
        },
        body,
      ),
    );
  };
  const fields = (s: Session) => () =>
    html`<input type="hidden" name="_csrf" value="${s.csrf}"><input type="hidden" name="_form" value="${formId()}">`;
  const loginPage = (res: ServerResponse, status: number, error?: string) =>
    send(
      res,
      status,
      page(
        { title: 'Sign in', base, ...(error ? { error } : {}) },
        html`<form method="post" action="${base}/login" class="action"><label for="token">Operator token</label>
<input id="token" type="password" name="token" required autocomplete="off" spellcheck="false">
<p class="muted">The token given to you (<code>bqi_op_…</code>). It is checked once; the console keeps a session, never the token.</p>
<button type="submit">Sign in</button></form>`,
      ),
    );

  const postOnly = async (req: IncomingMessage, s: Session | undefined): Promise<ActionForm> => {
    if (!sameOrigin(req, origins)) {
      throw new ConsoleRefusal(403, CONSOLE_CODES.forgery, 'refused: the form was not sent from this console');
    }
    const form = await readForm(req);
    if (s && !validCsrf(s, form._csrf)) {
      throw new ConsoleRefusal(
        403,
        CONSOLE_CODES.forgery,
        'refused: the anti-forgery token is missing or wrong; reload the page',
      );
    }
    return form;
  };

  const route = async (req: IncomingMessage, res: ServerResponse, url: URL, s: Session | undefined) => {
    const path = url.pathname.slice(base.length) || '/';
    const method = req.method ?? 'GET';
    if (path === '/login') {
      if (method === 'GET') return s ? redirect(res, base) : loginPage(res, 200);
      if (method !== 'POST') throw new ConsoleRefusal(405, CONSOLE_CODES.badRequest, 'GET or POST');
      const form = await postOnly(req, undefined);
      const operator = operatorOfToken(form.token?.trim() ?? '', credentials);
      if (!operator) {
        opts.logger?.warn({}, 'console sign-in refused: no operator has this token');
        return loginPage(res, 401, 'That token is not an operator token here.');
      }
      if (s) sessions.end(s);
      const created = sessions.create(operator);
      return redirect(res, base, { 'set-cookie': sessionCookie(base, created.id, overHttps(req)) });
    }
    if (!s) {
      if (method === 'GET') return redirect(res, `${base}/login`);
      throw new ConsoleRefusal(401, CONSOLE_CODES.unauthorized, 'sign in first');
    }
    const operator = s.operator;
    if (method === 'GET' && path === '/') {
      const order: InboxOrder = url.searchParams.get('order') === 'newest' ? 'newest' : 'oldest';
      return show(res, 200, s, 'Inbox', renderInbox(base, await readInbox(deps, operator), order));
    }
    if (method === 'GET' && path === '/operation') {
      const key = url.searchParams.get('key') ?? '';
      const view = key ? await readOperation(deps, key) : undefined;
      if (!view) throw new ConsoleRefusal(404, CONSOLE_CODES.notFound, 'no ledger record for this key');
      await recordFor(deps, operator, view.record.key);
      const canOpen = deps.decrypt.has(operator.actor) && deps.keyring !== undefined;
      return show(
        res,
        200,
        s,
        `Operation ${view.record.operation}`,
        renderOperation(base, view, { fields: fields(s), canOpen }),
      );
    }
    if (method === 'GET' && path === '/search') {
      const q = (url.searchParams.get('q') ?? '').trim().slice(0, MAX_QUERY);
      const found = q === '' ? { found: [], hidden: 0 } : await search(deps, operator, q);
      return show(res, 200, s, 'Search', renderSearch(base, q, found));
    }
    if (method !== 'POST') throw new ConsoleRefusal(404, CONSOLE_CODES.notFound, 'no such page');
    const form = await postOnly(req, s);
    if (path === '/logout') {
      sessions.end(s);
      return redirect(res, `${base}/login`, { 'set-cookie': sessionCookie(base, '', overHttps(req), 0) });
    }
    if (path === '/open') {
      const r = await openSealed(deps, operator, form);
      const view = await readOperation(deps, r.record.key);
      if (!view) throw new ConsoleRefusal(404, CONSOLE_CODES.notFound, 'no ledger record for this key');
      s.flash = { text: `opened; audit event ${r.eventId}`, error: false };
      return show(
        res,
        200,
        s,
        `Operation ${view.record.operation}`,
        renderOperation(base, view, { fields: fields(s), canOpen: true, opened: r.opened }),
      );
    }
    if (path !== '/action') throw new ConsoleRefusal(404, CONSOLE_CODES.notFound, 'no such page');
    const act = ACTIONS[form.action ?? ''];
    if (!act) throw new ConsoleRefusal(400, CONSOLE_CODES.badRequest, 'no such action');
    const id = form._form ?? '';
    if (!/^[A-Za-z0-9_-]{16,64}$/.test(id))
      throw new ConsoleRefusal(400, CONSOLE_CODES.badRequest, 'the form has no one-time id; reload the page');
    // One outcome per form: a double submit (or a reload of the POST) records nothing more.
    const outcome = JSON.parse(
      await once(s, id, async () => {
        const done = await act(deps, operator, form);
        return JSON.stringify(done);
      }),
    ) as { message: string; key: string };
    s.flash = { text: outcome.message, error: false };
    return redirect(res, `${base}/operation?key=${encodeURIComponent(outcome.key)}`);
  };

  return async (req, res) => {
    const url = new URL(req.url ?? '/', 'http://localhost');
    const s = sessions.of(req);
    try {
      await route(req, res, url, s);
    } catch (thrown) {
      const err = asRefusal(thrown);
      if (!(err instanceof ConsoleRefusal)) {
        opts.logger?.warn({ err: errorLabel(err) }, 'console request failed');
        return show(
          res,
          500,
          s,
          'Something went wrong',
          html`<p>The request could not be handled; the process log says why.</p>`,
        );
      }
      if (err.status === 403 || err.status === 401) {
        opts.logger?.warn({ actor: s?.operator.actor, code: err.code, path: url.pathname }, 'console request refused');
      }
      if (err.status === 401) return redirect(res, `${base}/login`);
      return show(
        res,
        err.status,
        s,
        'Refused',
        html`<p class="error" role="alert" data-code="${err.code}">${err.message}</p><p><a href="${base}">Back to the inbox</a></p>`,
      );
    }
  };
}
