import { pairValue } from './pair-value.js';
import { replaceSpans } from './replace-matches.js';
import { type HitSink, marker } from './scanner.js';
import { secretNameKind } from './secret-words.js';

/**
 * Header names whose whole value is a credential: `Authorization` and `Proxy-Authorization` (any
 * scheme: Bearer, Basic, Digest, AWS4-HMAC-SHA256 Credential=…, custom ones), `Cookie` and
 * `Set-Cookie` (every cookie, not only the first), and `X-…` headers whose words say secret
 * (`X-Api-Key`, `X-Auth-Token`, `X-Amz-Security-Token`, `X-Hub-Signature-256`). Matched only at
 * the start of a name run; the value is read in code.
 */
const HEADER =
  /(?<![\w-])(\\?["']?)((?:proxy-)?authorization|(?:set-)?cookie|x-[a-z0-9-]{1,60})(\\?["']?)[ \t]*:[ \t]*/gi;
const HINT = /authorization|cookie|x-/i;

/**
 * End of an unquoted header value: the end of the line (also an escaped `\n` inside JSON text),
 * or a `"` that closes a string the header sits in. Quotes that a value opens itself
 * (`response="…"` in Digest) are passed over in pairs.
 */
function headerEnd(text: string, from: number): number {
  let open = false;
  let openEscaped = false;
  for (let i = from; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 10 || c === 13) return i;
    const escaped = c === 92;
    const d = escaped ? text.charCodeAt(i + 1) : c;
    if (escaped && (d === 110 || d === 114)) return i; // an escaped newline
    if (d === 34) {
      const before = text.charCodeAt(i - 1);
      const opens = before === 61 || before === 32;
      if (escaped ? openEscaped : open) {
        if (escaped) openEscaped = false;
        else open = false;
      } else if (opens) {
        if (escaped) openEscaped = true;
        else open = true;
      } else return i;
    }
    if (escaped) i++;
  }
  return text.length;
}

/** `Basic …` and `Bearer …` keep their own rule ids; any other scheme is `auth_header`. */
function ruleFor(value: string): string {
  const scheme = value.slice(0, 7).toLowerCase();
  if (scheme.startsWith('basic ')) return 'basic_auth';
  if (scheme === 'bearer ') return 'bearer_token';
  return 'auth_header';
}

/** True when the text may hold a secret header (a cheap test before {@link scanSecretHeaders}). */
export function mayHoldSecretHeader(text: string): boolean {
  return HINT.test(text);
}

/** Credentials in HTTP headers written out in logs, curl commands, dumps and JSON. */
export function scanSecretHeaders(text: string, sink: HitSink): string {
  return replaceSpans(HEADER, text, (m) => {
    const name = m[2]!;
    if (name.charCodeAt(0) === 120 || name.charCodeAt(0) === 88) {
      if (secretNameKind(name) === undefined) return undefined;
    }
    const from = m.index + m[0].length;
    const c = text.charCodeAt(from);
    const quoted = c === 34 || c === 39 || (c === 92 && text.charCodeAt(from + 1) === 34);
    const value = quoted ? pairValue(text, from, true) : { start: from, end: headerEnd(text, from) };
    const raw = text.slice(value.start, value.end).trim();
    if (raw.length === 0 || raw.startsWith('[redacted:')) return undefined;
    const rule = ruleFor(raw);
    sink.hit(rule);
    return { start: value.start, end: value.end, replacement: marker(rule), resume: Math.max(value.end, from) };
  });
}
