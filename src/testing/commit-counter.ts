/**
 * A commit-counting HTTP server (node:http only) standing in for the system a processor calls, for
 * tests and demos that count side effects: count commits, not successes. `POST /effects` commits
 * one effect and honours the `Idempotency-Key` header (like Stripe / the IETF draft); faults can
 * be injected per test (commit-then-drop, drop-before-commit, error-500, delay, hold-until-released).
 *
 *   const server = await startCommitCounter();
 *   server.failNext('commit-then-drop');
 *   await postEffect(server.url, { ref: 'a' }, 'key-1'); // throws: the response was lost
 *   server.commits; // 1
 *
 * Over HTTP: `GET /effects[?key=K]` lists the commits, `POST /control` sets faults and the delay
 * (what a server in another process is driven by; see spawn.ts and cli.ts).
 */
import { setMaxListeners } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { canonicalJson } from '../fingerprint/canonical-json.js';

export type FailMode = 'commit-then-drop' | 'drop-before-commit' | 'error-500';
export const FAIL_MODES: readonly FailMode[] = ['commit-then-drop', 'drop-before-commit', 'error-500'];

export interface Effect {
  /** `eff_<n>`, n = 1, 2, … in commit order. */
  readonly id: string;
  /** The parsed JSON request body. */
  readonly body: unknown;
  /** The `Idempotency-Key` header sent with the request (recorded even when keys are not honoured). */
  readonly idempotencyKey: string | null;
}

/** Keeps committed requests pending: a promise holds until it settles; a function is awaited per commit. */
export type Hold = Promise<unknown> | ((effect: Effect) => unknown);

/** Matches effects: a string is an idempotency key; an object matches top-level body fields; or a predicate. */
export type EffectMatch = string | Readonly<Record<string, unknown>> | ((effect: Effect) => boolean);

export interface CommitCounterOptions {
  /** Honour the `Idempotency-Key` header (replay instead of a second commit). Default true. */
  honourIdempotencyKey?: boolean;
  /** Delay between the commit and the response, ms. Default 0. Settable later via `delayMs`. */
  delayMs?: number;
  /** Hold every committed request until this resolves. Settable later via `hold`. */
  hold?: Hold;
  /** Port on 127.0.0.1. Default 0 (random). */
  port?: number;
}

export interface HoldGate {
  /** Resolves with the effect once a request has committed and is being held. */
  readonly reached: Promise<Effect>;
  /** Lets the held request respond (or, with commit-then-drop, drop). Idempotent; may be called before `reached`. */
  release(): void;
  readonly released: boolean;
}

type StoredResponse = { status: number; body: unknown };
type KeyEntry = {
  fingerprint: string;
  response: StoredResponse | undefined;
  settled: Promise<void>;
  settle: () => void;
};
type PendingGate = { gate: HoldGate; take: (effect: Effect) => Promise<void> };

export class CommitCountingServer {
  /** Base URL, e.g. `http://127.0.0.1:41234` (no trailing slash). */
  readonly url: string;
  readonly port: number;
  readonly honourIdempotencyKey: boolean;
  /** Delay between commit and response for each committing request, ms. */
  delayMs: number;
  /** Holds every committing request (after the delay) until it settles; see `holdNext()` for one-shot gates. */
  hold: Hold | undefined;

  readonly #server: Server;
  // Every request held by a delay, a gate or a hold listens on it until it goes on: as many
  // listeners as requests in flight, which is no leak (Node warns past 10 by default).
  readonly #closing = unlimitedListeners(new AbortController());
  #closed: Promise<void> | undefined;
  #effects: Effect[] = [];
  #requests = 0;
  #seq = 0;
  #keys = new Map<string, KeyEntry>();
  #faults: FailMode[] = [];
  #gates: PendingGate[] = [];

  private constructor(server: Server, options: CommitCounterOptions) {
    this.#server = server;
    const { port } = server.address() as AddressInfo;
    this.port = port;
    this.url = `http://127.0.0.1:${port}`;
    this.honourIdempotencyKey = options.honourIdempotencyKey ?? true;
    this.delayMs = options.delayMs ?? 0;
    this.hold = options.hold;
  }

  static async start(options: CommitCounterOptions = {}): Promise<CommitCountingServer> {
    let self: CommitCountingServer | undefined;
    const server = createServer((req, res) => {
      self?.handle(req, res).catch((err: unknown) => {
        if (!res.headersSent) json(res, 500, { error: 'stub_failure', message: String(err) });
        else res.destroy();
      });
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(options.port ?? 0, '127.0.0.1', () => {
        server.off('error', reject);
        resolve();
      });
    });
    self = new CommitCountingServer(server, options);
    return self;
  }

  /** Number of committed effects. */
  get commits(): number {
    return this.#effects.length;
  }

  /** Number of `POST /effects` requests received (including replays, 422s and faulted ones; GETs not counted). */
  get requests(): number {
    return this.#requests;
  }

  /** A copy of the committed effects, in commit order. */
  get effects(): Effect[] {
    return [...this.#effects];
  }

  /** Committed effects matching `match` (all when omitted). */
  effectsFor(match?: EffectMatch): Effect[] {
    return this.#effects.filter(matcher(match));
  }

  /** Number of committed effects matching `match`: an idempotency key, `{ bodyField: value }` or a predicate. */
  commitsFor(match?: EffectMatch): number {
    return this.effectsFor(match).length;
  }

  /** The next `count` `POST /effects` requests fail with `mode` (queued after already-queued faults). */
  failNext(mode: FailMode, count = 1): void {
    if (!FAIL_MODES.includes(mode)) throw new Error(`unknown fail mode ${String(mode)}`);
    for (let i = 0; i < count; i++) this.#faults.push(mode);
  }

  /** Holds the next committing request after its commit until `release()`. Gates queue: one request each. */
  holdNext(): HoldGate {
    let release!: () => void;
    let reached!: (effect: Effect) => void;
    let released = false;
    const releasedP = new Promise<void>((r) => {
      release = () => {
        released = true;
        r();
      };
    });
    const gate: HoldGate = {
      reached: new Promise<Effect>((r) => {
        reached = r;
      }),
      release: () => release(),
      get released() {
        return released;
      },
    };
    this.#gates.push({
      gate,
      take: (effect) => {
        reached(effect);
        return releasedP;
      },
    });
    return gate;
  }

  /** Forgets effects, counters, stored idempotent responses, queued faults; releases pending gates. */
  reset(): void {
    for (const { gate } of this.#gates) gate.release();
    this.#gates = [];
    this.#faults = [];
    this.#effects = [];
    this.#keys = new Map();
    this.#requests = 0;
    this.#seq = 0;
  }

  /** Stops listening, destroys open sockets and unblocks held requests. Idempotent. */
  close(): Promise<void> {
    this.#closed ??= new Promise<void>((resolve, reject) => {
      this.#closing.abort();
      for (const { gate } of this.#gates) gate.release();
      this.#server.close((err) => (err ? reject(err) : resolve()));
      this.#server.closeAllConnections();
    });
    return this.#closed;
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', this.url);
    if (url.pathname === '/effects' && req.method === 'GET') {
      const key = url.searchParams.get('key');
      const effects = key === null ? this.effects : this.effectsFor(key);
      return json(res, 200, { commits: effects.length, effects });
    }
    if (url.pathname === '/effects' && req.method === 'POST') return this.postEffect(req, res);
    if (url.pathname === '/control' && req.method === 'POST') return this.control(req, res);
    return json(res, 404, { error: 'not_found' });
  }

  private async postEffect(req: IncomingMessage, res: ServerResponse): Promise<void> {
    this.#requests++;
    const raw = await readBody(req);
    const fault = this.#faults.shift();
    if (fault === 'drop-before-commit') return void req.socket.destroy();
    if (fault === 'error-500') return json(res, 500, { error: 'injected_failure' });
    const respond = (status: number, body: unknown, headers: Record<string, string> = {}) => {
      if (fault === 'commit-then-drop') req.socket.destroy();
      else json(res, status, body, headers);
    };

    let body: unknown;
    let fingerprint: string;
    try {
      body = JSON.parse(raw);
      // The library's canonical form (keys sorted): `{a,b}` and `{b,a}` are the same request.
      fingerprint = canonicalJson(body);
    } catch {
      return respond(400, { error: 'invalid_json' });
    }
    const header = req.headers['idempotency-key'];
    const idempotencyKey = typeof header === 'string' && header !== '' ? header : null;

    let entry: KeyEntry | undefined;
    if (idempotencyKey !== null && this.honourIdempotencyKey) {
      for (;;) {
        const existing = this.#keys.get(idempotencyKey);
        if (!existing) break;
        if (existing.fingerprint !== fingerprint) return respond(422, { error: 'idempotency_key_reused' });
        if (existing.response) {
          return respond(existing.response.status, existing.response.body, { 'Idempotent-Replayed': 'true' });
        }
        await existing.settled; // concurrent request with this key: wait for it to finish, then replay
      }
      let settle!: () => void;
      const settled = new Promise<void>((r) => {
        settle = r;
      });
      entry = { fingerprint, response: undefined, settled, settle };
      this.#keys.set(idempotencyKey, entry);
    }

    // Commit (synchronously, before any delay or hold).
    const effect: Effect = { id: `eff_${++this.#seq}`, body, idempotencyKey };
    this.#effects.push(effect);
    const response: StoredResponse = { status: 201, body: { id: effect.id, committed: true } };

    try {
      if (this.delayMs > 0) await sleep(this.delayMs, undefined, { signal: this.#closing.signal }).catch(() => {});
      const gate = this.#gates.shift();
      if (gate) await this.untilClosed(gate.take(effect));
      const hold = this.hold;
      if (hold) await this.untilClosed(typeof hold === 'function' ? Promise.resolve().then(() => hold(effect)) : hold);
    } finally {
      if (entry) {
        entry.response = response;
        entry.settle();
      }
    }
    respond(response.status, response.body);
  }

  private async control(req: IncomingMessage, res: ServerResponse): Promise<void> {
    let cmd: { failNext?: { mode?: unknown; count?: unknown }; delayMs?: unknown; reset?: unknown };
    try {
      cmd = JSON.parse(await readBody(req)) ?? {};
    } catch {
      return json(res, 400, { error: 'invalid_json' });
    }
    if (cmd.reset === true) this.reset();
    if (cmd.failNext) {
      const { mode, count } = cmd.failNext;
      if (!FAIL_MODES.includes(mode as FailMode)) return json(res, 400, { error: 'invalid_mode' });
      this.failNext(mode as FailMode, typeof count === 'number' ? count : 1);
    }
    if (typeof cmd.delayMs === 'number') this.delayMs = cmd.delayMs;
    return json(res, 200, { ok: true, commits: this.commits, requests: this.requests });
  }

  /** `p`, or less when the server closes; the close listener goes once `p` settles. */
  private untilClosed(p: Promise<unknown>): Promise<unknown> {
    const signal = this.#closing.signal;
    if (signal.aborted) return Promise.resolve();
    return new Promise<void>((resolve) => {
      const done = () => {
        signal.removeEventListener('abort', done);
        resolve();
      };
      signal.addEventListener('abort', done, { once: true });
      p.then(done, done);
    });
  }
}

/** Starts a commit-counting server on 127.0.0.1 (random port unless `options.port`). Close it with `close()`. */
export function startCommitCounter(options: CommitCounterOptions = {}): Promise<CommitCountingServer> {
  return CommitCountingServer.start(options);
}

function json(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...headers });
  res.end(text);
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

function matcher(match: EffectMatch | undefined): (effect: Effect) => boolean {
  if (match === undefined) return () => true;
  if (typeof match === 'function') return match;
  if (typeof match === 'string') return (e) => e.idempotencyKey === match;
  const wanted = Object.entries(match).map(([k, v]) => [k, canonicalJson(v)] as const);
  return (e) => {
    const body = e.body;
    if (!body || typeof body !== 'object') return false;
    return wanted.every(
      ([k, v]) => Object.hasOwn(body, k) && canonicalJson((body as Record<string, unknown>)[k]) === v,
    );
  };
}

function unlimitedListeners(controller: AbortController): AbortController {
  setMaxListeners(0, controller.signal);
  return controller;
}
