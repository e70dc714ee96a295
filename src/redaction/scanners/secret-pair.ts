import { shannonEntropy } from './checksums.js';
import { replaceMatches } from './replace-matches.js';
import { marker, type Scanner } from './scanner.js';
import { F_ASSIGN } from './text-features.js';

/**
 * `<secret-ish name><name tail> [:=] <value>` in logs, URLs, env dumps, YAML and (escaped) JSON.
 * The tail and the gaps are bounded, so a start that fails costs a bounded number of steps; the
 * value is a run with nothing after it, so a match never backtracks into it.
 */
const PAIR =
  /(pass(?:word|wd|phrase)?|pwd|secret|token|api[_-]?key|access[_-]?key|private[_-]?key|signing[_-]?key|auth(?:orization)?|credentials?|session[_-]?id|cookie)([A-Za-z0-9_-]{0,24})(\\?["']?[ \t]{0,3}[:=][ \t]{0,3})(\\?"[^"\\\r\n]+|\\?'[^'\\\r\n]+|[^\s"'`\\,;&<>()[\]{}]+)/gi;

/** English words that start like a secret name (`deadline passed: retrying`) but name none. */
const ORDINARY_WORDS = new Set([
  'passed',
  'passes',
  'passing',
  'passage',
  'passive',
  'passenger',
  'passengers',
  'passthrough',
  'secretary',
  'secretly',
  'tokenized',
  'tokenizer',
  'authored',
  'author',
  'authors',
  'authority',
  'authorized',
  'authorised',
]);

/** Names whose value is a secret whatever it looks like. */
const STRONG = /^(?:pass|pwd|secret|private|signing|authorization|credential|cookie)/i;
/** A tail that turns the name into metadata about the secret (`token_type`, `password_length`). */
const METADATA_TAILS = new Set([
  'name',
  'names',
  'type',
  'kind',
  'count',
  'length',
  'len',
  'ttl',
  'expiry',
  'expires',
  'expiresat',
  'expiresin',
  'version',
  'ref',
  'arn',
  'id',
  'ids',
  'url',
  'uri',
  'path',
  'file',
  'policy',
  'usage',
  'hint',
  'limit',
  'max',
  'min',
  'required',
  'less',
]);
/** Values that are no secret: empty markers, and the scheme word of `Authorization: Bearer …` (the auth scanner takes the token). */
const PLACEHOLDERS = new Set([
  'null',
  'undefined',
  'none',
  'true',
  'false',
  'redacted',
  'required',
  'missing',
  'bearer',
  'basic',
  'token',
  'digest',
  'negotiate',
]);
const AWS_SECRET = /^[A-Za-z0-9/+=]{40}$/;

/** How many of lower, upper, digit, other a value mixes. */
function charClasses(value: string): number {
  return (
    (/[a-z]/.test(value) ? 1 : 0) +
    (/[A-Z]/.test(value) ? 1 : 0) +
    (/[0-9]/.test(value) ? 1 : 0) +
    (/[^A-Za-z0-9]/.test(value) ? 1 : 0)
  );
}

/** What the other scanners leave behind; a value holding one was already redacted. */
const MARKER = /\[(?:redacted:|card …|iban |phone …)|\*\*\*/;

/**
 * `[redacted:…]`, `j***@…`, `*****`, `${ENV}`, `{{var}}`, `null`: masks, markers and references,
 * not secrets. Skipping values that hold a marker also keeps redaction idempotent: a second pass
 * must not judge `[card …7388]` where the first judged the digits.
 */
function isPlaceholder(value: string): boolean {
  return (
    value.startsWith('${') || value.startsWith('{{') || MARKER.test(value) || PLACEHOLDERS.has(value.toLowerCase())
  );
}

/**
 * Rule id for a pair, or undefined when the value is not a secret. Strong names (password,
 * secret, private key, authorization, cookie) take any real value of 4+ characters; weak ones
 * (token, api key, access key, session id, auth) need a high-entropy value, so that
 * `max_tokens=1024` and `auth: required` stay.
 */
function classify(name: string, tail: string, value: string): string | undefined {
  const tailKey = tail.replace(/[^A-Za-z0-9]/g, '').toLowerCase();
  if (METADATA_TAILS.has(tailKey)) return undefined;
  if (ORDINARY_WORDS.has(`${name}${tail}`.toLowerCase())) return undefined;
  if (value.length < 4 || isPlaceholder(value)) return undefined;
  if (name.toLowerCase() === 'secret' && tailKey === 'accesskey' && AWS_SECRET.test(value)) return 'aws_secret_key';
  if (STRONG.test(name)) return 'secret_pair';
  if (value.length >= 12 && charClasses(value) >= 2 && shannonEntropy(value) >= 3) return 'secret_pair';
  return undefined;
}

/** Generic `name=value` / `"name": "value"` secrets: secret-ish name, and a secret-looking value. */
export const secretPairScanner: Scanner = {
  id: 'secret_pair',
  allOf: F_ASSIGN,
  anyOf: 0,
  minLength: 7,
  minDigits: 0,
  minRun: 0,
  scan(text, sink) {
    return replaceMatches(PAIR, text, ([m, name = '', tail = '', sep = '', raw = '']) => {
      // Keep an opening quote (and its escape) so that the surrounding JSON stays well-formed.
      const open =
        raw.startsWith('\\"') || raw.startsWith("\\'") ? 2 : raw.startsWith('"') || raw.startsWith("'") ? 1 : 0;
      const rule = classify(name, tail, raw.slice(open));
      if (!rule) return m;
      sink.hit(rule);
      return name + tail + sep + raw.slice(0, open) + marker(rule);
    });
  },
};
