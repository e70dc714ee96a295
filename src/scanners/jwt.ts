import { replaceMatches } from './replace-matches.js';
import { marker, type Scanner } from './scanner.js';
import { F_DOT } from './text-features.js';

/**
 * A run that starts with `eyJ` (base64url of `{"`) and holds a dot. The look-behind makes a
 * match start only at the beginning of a base64url run, so a run is walked once (linear).
 */
const JWT_CANDIDATE = /(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{6,}\.[A-Za-z0-9_.-]{2,}/g;
const MAX_HEADER = 4096;

/** True when `part` is base64url of a JSON object with a string `alg` (a JOSE header). */
function joseHeader(part: string): { enc: boolean } | undefined {
  if (part.length > MAX_HEADER) return undefined;
  try {
    const header: unknown = JSON.parse(Buffer.from(part, 'base64url').toString('utf8'));
    if (typeof header !== 'object' || header === null || typeof (header as { alg?: unknown }).alg !== 'string') {
      return undefined;
    }
    return { enc: typeof (header as { enc?: unknown }).enc === 'string' };
  } catch {
    return undefined;
  }
}

/**
 * JSON Web Tokens (JWS: three parts; JWE: five), structure-checked: the first part must decode to
 * a JOSE header, so `eyJ`-looking prose or ids are left alone. Dots after the token stay.
 */
export const jwtScanner: Scanner = {
  id: 'jwt',
  allOf: F_DOT,
  anyOf: 0,
  minLength: 20,
  minDigits: 0,
  minRun: 0,
  minAlnum: 0,
  mayMatch: (text) => text.includes('eyJ'),
  scan(text, sink) {
    return replaceMatches(JWT_CANDIDATE, text, ([m]) => {
      const parts = m.split('.');
      const header = parts[0] === undefined ? undefined : joseHeader(parts[0]);
      if (!header) return m;
      const count = header.enc && parts.length >= 5 ? 5 : 3;
      if (parts.length < count || parts[1] === '') return m;
      const token = parts.slice(0, count).join('.');
      sink.hit('jwt');
      return marker('jwt') + m.slice(token.length);
    });
  },
};
