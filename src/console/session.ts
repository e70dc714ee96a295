import { randomBytes, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { OperatorCredential } from '../shared/operators.js';

/** The session cookie's name. */
export const SESSION_COOKIE = 'bqi_console';
/** How long a session lasts without use. */
export const DEFAULT_SESSION_IDLE_MS = 30 * 60_000;
/** How long a session lasts at most, used or not. */
export const DEFAULT_SESSION_MAX_MS = 12 * 3600_000;
/** Answers kept per session for repeated submissions of one form. */
const MAX_REMEMBERED = 200;
const MAX_SESSIONS = 10_000;

/** A signed-in operator: who (from the token), the session's anti-forgery token, the forms answered. */
export type Session = {
  id: string;
  operator: OperatorCredential;
  csrf: string;
  createdAt: number;
  seenAt: number;
  /** The outcome of each form already handled, by its one-time id: a repeated submit gets it again. */
  done: Map<string, string>;
  /** Forms being handled now, by one-time id: a second submit waits for the first. */
  running: Map<string, Promise<string>>;
  /** A message for the next page shown (after a redirect). */
  flash?: { text: string; error: boolean };
};

const random = () => randomBytes(32).toString('base64url');

/**
 * Sessions held in this process's memory: a restart signs everyone out. The cookie carries a
 * random id only; the operator's token is never kept or sent back.
 */
export class Sessions {
  private readonly byId = new Map<string, Session>();

  constructor(
    private readonly idleMs = DEFAULT_SESSION_IDLE_MS,
    private readonly maxMs = DEFAULT_SESSION_MAX_MS,
  ) {}

  create(operator: OperatorCredential): Session {
    this.prune();
    const now = Date.now();
    const session: Session = {
      id: random(),
      operator,
      csrf: random(),
      createdAt: now,
      seenAt: now,
      done: new Map(),
      running: new Map(),
    };
    this.byId.set(session.id, session);
    return session;
  }

  /** The live session of a request's cookie, or undefined (and an expired one is dropped). */
  of(req: IncomingMessage): Session | undefined {
    const id = cookie(req, SESSION_COOKIE);
    if (!id) return undefined;
    const s = this.byId.get(id);
    if (!s) return undefined;
    const now = Date.now();
    if (now - s.seenAt > this.idleMs || now - s.createdAt > this.maxMs) {
      this.byId.delete(id);
      return undefined;
    }
    s.seenAt = now;
    return s;
  }

  end(session: Session): void {
    this.byId.delete(session.id);
  }

  private prune(): void {
    const now = Date.now();
    for (const [id, s] of this.byId) {
      if (now - s.seenAt > this.idleMs || now - s.createdAt > this.maxMs) this.byId.delete(id);
    }
    // Bounded: the oldest sessions go first.
    while (this.byId.size >= MAX_SESSIONS) {
      const oldest = this.byId.keys().next().value as string;
      this.byId.delete(oldest);
    }
  }
}

/**
 * Runs a form's action once per one-time id: a second submit of the same form (a double click,
 * a reload of the POST) gets the first outcome, and nothing is done again.
 */
export async function once(session: Session, formId: string, act: () => Promise<string>): Promise<string> {
  const done = session.done.get(formId);
  if (done !== undefined) return done;
  const running = session.running.get(formId);
  if (running) return running;
  const p = act();
  session.running.set(formId, p);
  try {
    const outcome = await p;
    session.done.set(formId, outcome);
    if (session.done.size > MAX_REMEMBERED) session.done.delete(session.done.keys().next().value as string);
    return outcome;
  } finally {
    session.running.delete(formId);
  }
}

/** A new one-time id for a form. */
export const formId = (): string => randomBytes(16).toString('base64url');

/** The value of a cookie of the request. */
export function cookie(req: IncomingMessage, name: string): string | undefined {
  for (const part of (req.headers.cookie ?? '').split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
}

/** Whether the request reached us over https (directly, or through a proxy that says so). */
export function overHttps(req: IncomingMessage): boolean {
  const proto = String(req.headers['x-forwarded-proto'] ?? '')
    .split(',')[0]
    ?.trim();
  return (req.socket as { encrypted?: boolean }).encrypted === true || proto === 'https';
}

/** The Set-Cookie of a session: HttpOnly, SameSite=Strict, scoped to the console, Secure over https. */
export function sessionCookie(base: string, value: string, secure: boolean, maxAgeS?: number): string {
  const parts = [`${SESSION_COOKIE}=${value}`, `Path=${base}`, 'HttpOnly', 'SameSite=Strict'];
  if (maxAgeS !== undefined) parts.push(`Max-Age=${maxAgeS}`);
  if (secure) parts.push('Secure');
  return parts.join('; ');
}

/** Whether the form's anti-forgery token is the session's (compared in constant time). */
export function validCsrf(session: Session, given: string | undefined): boolean {
  if (typeof given !== 'string') return false;
  const a = Buffer.from(given);
  const b = Buffer.from(session.csrf);
  return a.length === b.length && timingSafeEqual(a, b);
}

/**
 * Whether a state-changing request comes from the console's own pages: its `Origin` (or, when a
 * browser sent none, its `Referer`) names the host the request was sent to, or one of `origins`
 * (the public origin behind a proxy, e.g. `https://ops.example.com`). A request with neither is refused.
 */
export function sameOrigin(req: IncomingMessage, origins: readonly string[]): boolean {
  const told = req.headers.origin ?? req.headers.referer;
  if (typeof told !== 'string' || told === '' || told === 'null') return false;
  let origin: string;
  try {
    origin = new URL(told).origin;
  } catch {
    return false;
  }
  if (origins.includes(origin)) return true;
  const hosts = [req.headers.host, req.headers['x-forwarded-host']]
    .flatMap((h) => (typeof h === 'string' ? h.split(',') : []))
    .map((h) => h.trim())
    .filter((h) => h !== '');
  return hosts.some((h) => origin === `http://${h}` || origin === `https://${h}`);
}
