import { randomValue } from './randomness.js';
import { replaceMatches } from './replace-matches.js';
import { type HitSink, marker, type Scanner } from './scanner.js';
import { F_ASSIGN, F_AT } from './text-features.js';

/** How far after `://` the user information may reach. */
const MAX_AUTHORITY = 2048;
/** `host:8080/path`: a port then a path, not `user:password`. */
const PORT_THEN_PATH = /^[0-9]{1,5}\//;
const HOST_START = /[A-Za-z0-9[\]]/;
/**
 * Scheme-less `user:password@host[:port]` (`app:s3cret@db:5432`, in a DSN or a command line).
 * Each part is bounded and none can hold the `@` or `:` that ends it, so a start costs a bounded
 * number of steps; the look-behind starts a match only at the beginning of a run.
 */
const BARE =
  /(?<![\w.%+:/@\\[\]-])([A-Za-z0-9._%+-]{1,64}):([^\s@:/"'<>]{1,256})@(?=[A-Za-z0-9[])([A-Za-z0-9-]{1,63}(?:\.[A-Za-z0-9-]{1,63}){0,8})/g;
/** `mailto:jane@example.com` is an address, not a credential. */
const NOT_USERS = new Set(['mailto', 'sip', 'sips', 'tel', 'xmpp', 'urn', 'news', 'data', 'file', 'im', 'pres']);

function isSpace(c: number): boolean {
  return c === 32 || c === 9 || c === 10 || c === 13 || c === 34 || c === 39 || c === 60 || c === 62 || c === 96;
}

/**
 * The user information after one `://` at `start`, redacted: the password goes (all of it, also
 * when it holds `@`, `/` or `%40`, up to the last `@` before the host), and a user part that
 * looks like a token (`https://ghp_…@github.com`) goes too. Returns the replacement and where
 * it ends, or undefined when there is nothing to redact.
 */
function userInfo(text: string, start: number): { end: number; replacement: string; rule: string } | undefined {
  let stop = start;
  const limit = Math.min(text.length, start + MAX_AUTHORITY);
  while (stop < limit && !isSpace(text.charCodeAt(stop))) stop++;
  const run = text.slice(start, stop);
  let at = run.lastIndexOf('@');
  while (at > 0 && !HOST_START.test(run.charAt(at + 1))) at = run.lastIndexOf('@', at - 1);
  if (at < 0) return undefined;
  const info = run.slice(0, at);
  const colon = info.indexOf(':');
  const slash = info.indexOf('/');
  if (colon < 0) {
    // No password; the user part alone is a secret when it is a token.
    if (slash >= 0 || info.includes('?') || !randomValue(info)) return undefined;
    return { end: start + at, replacement: marker('url_credentials'), rule: 'url_credentials' };
  }
  if (slash >= 0 && slash < colon) return undefined; // an `@` in the path
  const password = info.slice(colon + 1);
  if (PORT_THEN_PATH.test(password) || password.length === 0 || password.startsWith('[redacted:')) return undefined;
  return {
    end: start + at,
    replacement: `${info.slice(0, colon)}:${marker('url_credentials')}`,
    rule: 'url_credentials',
  };
}

function scanSchemed(text: string, sink: HitSink): string {
  let out = '';
  let last = 0;
  for (let i = text.indexOf('://'); i >= 0; i = text.indexOf('://', i + 3)) {
    if (i + 3 < last) continue;
    const found = userInfo(text, i + 3);
    if (!found) continue;
    sink.hit(found.rule);
    out += text.slice(last, i + 3) + found.replacement;
    last = found.end;
  }
  return last === 0 ? text : out + text.slice(last);
}

/**
 * Passwords in connection strings and URLs: `postgres://app:hunter2@db/prod`, an empty user
 * (`redis://:pw@cache`), a password holding `@`, `/` or `%40`, and scheme-less
 * `user:password@host:port`. Query parameters (`?token=…&sig=…`) are the pair scanner's.
 */
export const urlCredentialsScanner: Scanner = {
  id: 'url_credentials',
  allOf: F_AT | F_ASSIGN,
  anyOf: 0,
  minLength: 8,
  minDigits: 0,
  minRun: 0,
  minAlnum: 0,
  mayMatch: (text) => text.includes(':'),
  scan(text, sink) {
    const out = text.includes('://') ? scanSchemed(text, sink) : text;
    return replaceMatches(BARE, out, ([m, user = '', password = '', host = '']) => {
      if (password.startsWith('[redacted') || NOT_USERS.has(user.toLowerCase())) return m;
      if (/^[0-9]+$/.test(user) && /^[0-9]+$/.test(password)) return m; // `10:30@venue`, a time
      sink.hit('url_credentials');
      return `${user}:${marker('url_credentials')}@${host}`;
    });
  },
};
