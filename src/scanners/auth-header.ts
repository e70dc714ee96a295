import { replaceMatches } from './replace-matches.js';
import { marker, type Scanner } from './scanner.js';
import { mayHoldSecretHeader, scanSecretHeaders } from './secret-header.js';
import { F_ASSIGN, F_SPACE } from './text-features.js';

/** The scheme, then a bounded gap, then a run of token68 characters (RFC 7235). */
const AUTH = /(?<![A-Za-z0-9_])(Bearer|Basic|Token|Digest|ApiKey|Api-Key)([ \t]{1,4})([A-Za-z0-9._~+/-]{8,}=*)/gi;
/** The scheme names without their first letter: one cheap search before the real pattern. */
const HINT = /earer|asic|oken|igest|pi-?key/i;
/** Either hint, in one search: most texts hold neither. */
const ANY_HINT = /earer|asic|oken|igest|pi-?key|authorization|cookie|x-/i;
const DIGIT = /[0-9]/;
const SYMBOL = /[_~+/=-]/;
const UPPER = /[A-Z]/;
const LOWER = /[a-z]/;
const BASIC_DECODED = /^[\x20-\x7e]{1,512}$/;

/**
 * A word after "Bearer" ("Bearer instruments", "Token expired.") is prose; a token has a digit,
 * or symbols in mixed case, or is long.
 */
function tokenLike(token: string): boolean {
  return (
    DIGIT.test(token) ||
    (token.length >= 16 && SYMBOL.test(token) && UPPER.test(token) && LOWER.test(token)) ||
    token.length >= 24
  );
}

function trimDots(run: string): string {
  let end = run.length;
  while (end > 0 && run.charCodeAt(end - 1) === 46) end--;
  return run.slice(0, end);
}

/** True when a Basic credential decodes to printable `user:password`. */
function basicLike(token: string): boolean {
  const decoded = Buffer.from(token, 'base64').toString('latin1');
  return decoded.includes(':') && BASIC_DECODED.test(decoded);
}

/** `Bearer <token>`, `Basic <base64>`, `Digest …` and other schemes in prose, without a header name. */
function scanSchemes(text: string, sink: { hit(rule: string): void }): string {
  return replaceMatches(AUTH, text, ([m, scheme = '', gap = '', run = '']) => {
    // A full stop after the token ends the sentence; it is not part of the credential.
    const token = trimDots(run);
    if (token.length < 8 || token.startsWith('[redacted')) return m;
    const lower = scheme.toLowerCase();
    const basic = lower === 'basic';
    if (!(basic ? basicLike(token) || tokenLike(token) : tokenLike(token))) return m;
    const rule = basic ? 'basic_auth' : lower === 'bearer' || lower === 'token' ? 'bearer_token' : 'auth_header';
    sink.hit(rule);
    return scheme + gap + marker(rule) + run.slice(token.length);
  });
}

/**
 * Authorization values: whole header values (`Authorization:` with any scheme, `Cookie:`,
 * `Set-Cookie:`, `X-Api-Key:` and other secret `X-` headers, see `scanSecretHeaders`), then
 * scheme and token pairs in prose (`Bearer <token>`, `Basic <base64 user:password>`).
 */
export const authHeaderScanner: Scanner = {
  id: 'auth_header',
  allOf: 0,
  anyOf: F_SPACE | F_ASSIGN,
  minLength: 8,
  minDigits: 0,
  minRun: 0,
  minAlnum: 0,
  mayMatch: (text) => ANY_HINT.test(text),
  scan(text, sink, features) {
    let out = text;
    if (features & F_ASSIGN && mayHoldSecretHeader(out)) out = scanSecretHeaders(out, sink);
    if (features & F_SPACE && HINT.test(out)) out = scanSchemes(out, sink);
    return out;
  },
};
