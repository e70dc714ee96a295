/**
 * A real HTTP "downstream" stub (node:http only) for tests and demos that need to count side
 * effects: count commits, not successes. `POST /effects` commits one effect and honours the
 * `Idempotency-Key` header (like Stripe / the IETF draft); faults can be injected per test
 * (commit-then-drop, drop-before-commit, error-500, delay, hold-until-released).
 *
 * In-process use (the main one):
 *   const ds = await startDownstream();
 *   ds.failNext('commit-then-drop');
 *   await postEffect(ds.url, { ref: 'a' }, 'key-1'); // throws: the response was lost
 *   ds.commits; // 1
 *
 * Child-process use: `npx tsx src/testing/downstream-stub.ts [--no-idempotency] [--port N] [--delay-ms N]`
 * prints one JSON line `{"url":"http://127.0.0.1:PORT"}` on stdout; or `spawnDownstream()` from a test.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { realpathSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { resolve as resolvePath } from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';

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

export interface DownstreamOptions {
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

export class Downstream {
  /** Base URL, e.g. `http://127.0.0.1:41234` (no trailing slash). */
  readonly url: string;
  readonly port: number;
  readonly honourIdempotencyKey: boolean;
  /** Delay between commit and response for each committing request, ms. */
  delayMs: number;
  /** Holds every committing request (after the delay) until it settles; see `holdNext()` for one-shot gates. */
  hold: Hold | undefined;

  readonly #server: Server;
  readonly #closing = new AbortController();
  #closed: Promise<void> | undefined;
  #effects: Effect[] = [];
  #requests = 0;
  #seq = 0;
  #keys = new Map<string, KeyEntry>();
  #faults: FailMode[] = [];
  #gates: PendingGate[] = [];

  private constructor(server: Server, options: DownstreamOptions) {
    this.#server = server;
    const { port } = server.address() as AddressInfo;
    this.port = port;
    this.url = `http://127.0.0.1:${port}`;
    this.honourIdempotencyKey = options.honourIdempotencyKey ?? true;
    this.delayMs = options.delayMs ?? 0;
    this.hold = options.hold;
  }

  static async start(options: DownstreamOptions = {}): Promise<Downstream> {
    let self: Downstream | undefined;
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
    self = new Downstream(server, options);
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
    try {
      body = JSON.parse(raw);
    } catch {
      return respond(400, { error: 'invalid_json' });
    }
    const header = req.headers['idempotency-key'];
    const idempotencyKey = typeof header === 'string' && header !== '' ? header : null;

    let entry: KeyEntry | undefined;
    if (idempotencyKey !== null && this.honourIdempotencyKey) {
      const fingerprint = canonicalJson(body);
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

  private untilClosed(p: Promise<unknown>): Promise<unknown> {
    const signal = this.#closing.signal;
    if (signal.aborted) return Promise.resolve();
    return Promise.race([
      p.catch(() => {}),
      new Promise<void>((r) => signal.addEventListener('abort', () => r(), { once: true })),
    ]);
  }
}

/** Starts a stub on 127.0.0.1 (random port unless `options.port`). Close it with `close()`. */
export function startDownstream(options: DownstreamOptions = {}): Promise<Downstream> {
  return Downstream.start(options);
}

export interface PostEffectResult<T = unknown> {
  status: number;
  body: T;
  /** True when the stub replayed a stored response (`Idempotent-Replayed: true`). */
  replayed: boolean;
}

/** A network failure talking to the stub: the response (if any) was lost. `code` e.g. UND_ERR_SOCKET, ECONNRESET. */
export class DownstreamRequestError extends Error {
  readonly code: string | undefined;
  constructor(message: string, code: string | undefined, cause: unknown) {
    super(message, { cause });
    this.name = 'DownstreamRequestError';
    this.code = code;
  }
}

/**
 * `POST <url>/effects` (`url` may be the base URL or already end in /effects) with a JSON body.
 * Returns any HTTP status (no throw on 4xx/5xx); throws DownstreamRequestError on network errors.
 */
export async function postEffect<T = unknown>(
  url: string,
  body: unknown,
  idempotencyKey?: string,
  signal?: AbortSignal,
): Promise<PostEffectResult<T>> {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (idempotencyKey !== undefined) headers['idempotency-key'] = idempotencyKey;
  try {
    const res = await fetch(new URL('/effects', url), {
      method: 'POST',
      headers,
      body: JSON.stringify(body),
      signal: signal ?? null,
    });
    const text = await res.text();
    return {
      status: res.status,
      body: (text === '' ? undefined : JSON.parse(text)) as T,
      replayed: res.headers.get('idempotent-replayed') === 'true',
    };
  } catch (err) {
    if (signal?.aborted) throw err;
    const code = errorCode(err);
    const reason = err instanceof Error && err.cause instanceof Error ? err.cause.message : String(err);
    throw new DownstreamRequestError(`POST /effects failed: ${reason}${code ? ` (${code})` : ''}`, code, err);
  }
}

export interface SpawnedDownstream {
  readonly url: string;
  readonly child: ChildProcess;
  /** SIGTERM and wait for exit. */
  stop(): Promise<void>;
}

/**
 * Runs the stub in a child process (`node --import tsx downstream.ts`) so that other processes share it.
 * Counters are then read over HTTP (`GET /effects`) and faults set via `POST /control`. The child exits when
 * this process dies (its stdin closes).
 */
export async function spawnDownstream(
  options: Pick<DownstreamOptions, 'honourIdempotencyKey' | 'delayMs' | 'port'> = {},
): Promise<SpawnedDownstream> {
  const self = fileURLToPath(import.meta.url);
  // From the TypeScript sources (tests, the demo) the child needs tsx; the built file runs as is.
  const args = self.endsWith('.ts') ? ['--import', 'tsx', self] : [self];
  if (options.honourIdempotencyKey === false) args.push('--no-idempotency');
  if (options.delayMs !== undefined) args.push('--delay-ms', String(options.delayMs));
  if (options.port !== undefined) args.push('--port', String(options.port));
  const child = spawn(process.execPath, args, {
    stdio: ['pipe', 'pipe', 'inherit'],
    env: { ...process.env, DOWNSTREAM_EXIT_ON_STDIN_END: '1' },
  });
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  const url = await new Promise<string>((resolve, reject) => {
    const lines = createInterface({ input: child.stdout! });
    const fail = () => reject(new Error('downstream child exited before printing its URL'));
    child.once('exit', fail);
    child.once('error', reject);
    lines.once('line', (line) => {
      child.off('exit', fail);
      lines.close();
      try {
        resolve((JSON.parse(line) as { url: string }).url);
      } catch (err) {
        reject(err);
      }
    });
  });
  return {
    url,
    child,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
}

/** CLI entry: starts the stub, prints `{"url":…}` on stdout, closes on SIGTERM/SIGINT. */
export async function main(argv: readonly string[] = process.argv.slice(2)): Promise<Downstream> {
  const options: DownstreamOptions = {};
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '--no-idempotency') options.honourIdempotencyKey = false;
    else if (arg === '--port') options.port = Number(argv[++i]);
    else if (arg === '--delay-ms') options.delayMs = Number(argv[++i]);
    else throw new Error(`unknown argument ${arg}`);
  }
  const downstream = await startDownstream(options);
  const stop = () => {
    downstream.close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
  if (process.env.DOWNSTREAM_EXIT_ON_STDIN_END === '1') {
    process.stdin.once('end', stop).once('close', stop).resume();
  }
  process.stdout.write(`${JSON.stringify({ url: downstream.url })}\n`);
  return downstream;
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

/** JSON with object keys sorted, so `{a,b}` and `{b,a}` fingerprint the same. */
function canonicalJson(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) =>
    v && typeof v === 'object' && !Array.isArray(v)
      ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : v,
  );
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

function errorCode(err: unknown): string | undefined {
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 5; e = e.cause, depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string') return code;
  }
  return undefined;
}

function isMain(): boolean {
  const entry = process.argv[1];
  if (!entry) return false;
  try {
    return realpathSync(resolvePath(entry)) === realpathSync(fileURLToPath(import.meta.url));
  } catch {
    return false;
  }
}

if (isMain()) {
  main().catch((err: unknown) => {
    console.error(err);
    process.exit(1);
  });
}
