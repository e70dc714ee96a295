import { shannonEntropy } from './checksums.js';
import { pairValue } from './pair-value.js';
import { randomValue } from './randomness.js';
import { replaceSpans } from './replace-matches.js';
import { marker, type Scanner } from './scanner.js';
import { secretNameKind } from './secret-words.js';
import { F_ASSIGN } from './text-features.js';

/**
 * A name, an optional closing quote, and `:`, `=` or `=>` with a few spaces around. The name is
 * a run of word characters that starts with a letter, `_` or `-` (letters of any script included,
 * so a Cyrillic look-alike is seen; not a digit, so `10:20:30` is no name), matched only from the start of a run, so each run costs one walk; the value is read in code.
 */
const NAME =
  /(?<![\w.\-\u00c0-\uffff\\])((?:\\{1,7})?["']?)([A-Za-z_\-\u00c0-\uffff][\w.\-\u00c0-\uffff]*)((?:\\{1,7})?["']?)[ \t]{0,3}(?:=>|[:=])[ \t]{0,3}/g;
/** A cheap test before the word-by-word judgement: nothing secret-ish in the name, no work. */
const HINT =
  /pass|pw|secret|cred|auth|cookie|tok|key|sess|sid|sig|otp|csrf|xsrf|nonce|salt|pin|cv[cv]|bearer|jwt|wort|contrase|senha|motdepasse|[\u0080-\uffff]/i;
/** Only the end of a very long name is judged (`aaaa…password`). */
const MAX_NAME = 64;

/** Values that are no secret: empty markers and the scheme word of `Authorization: Bearer …`. */
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
  'n/a',
  'optional',
  'yes',
  'no',
]);
const AWS_SECRET = /^[A-Za-z0-9/+=]{40}$/;
/** What the other scanners leave behind; a value holding one was already redacted. */
const MARKER = /\[(?:redacted:|card …|iban |phone …)|\*\*\*/;

/** How many of lower, upper, digit, other a value mixes. */
function charClasses(value: string): number {
  return (
    (/[a-z]/.test(value) ? 1 : 0) +
    (/[A-Z]/.test(value) ? 1 : 0) +
    (/[0-9]/.test(value) ? 1 : 0) +
    (/[^A-Za-z0-9]/.test(value) ? 1 : 0)
  );
}

/**
 * `[redacted:…]`, `j***@…`, `${ENV}`, `{{var}}`, `null`: masks, markers and references, not
 * secrets. Skipping values that hold a marker also keeps redaction idempotent.
 */
function isPlaceholder(value: string): boolean {
  return (
    value.startsWith('${') || value.startsWith('{{') || MARKER.test(value) || PLACEHOLDERS.has(value.toLowerCase())
  );
}

/**
 * Rule id for a pair, or undefined when the value is not a secret. A strong name (password,
 * secret, credential, cookie, signature…) takes any real value; a weak one (token, api key,
 * session, auth…) needs a value that looks like a secret, so that `max_tokens=1024` and
 * `auth: required` stay.
 */
function classify(kind: 'strong' | 'weak', name: string, value: string): string | undefined {
  if (value.length < (kind === 'strong' ? 2 : 4) || isPlaceholder(value)) return undefined;
  if (kind === 'strong') {
    const aws =
      name
        .replace(/[^A-Za-z]/g, '')
        .toLowerCase()
        .endsWith('secretaccesskey') && AWS_SECRET.test(value.split(' ')[0]!);
    return aws ? 'aws_secret_key' : 'secret_pair';
  }
  if (value.length >= 12 && charClasses(value) >= 2 && shannonEntropy(value) >= 3) return 'secret_pair';
  return randomValue(value) ? 'secret_pair' : undefined;
}

/**
 * `name=value`, `name: value`, `"name":"value"` (also escaped JSON, YAML, env dumps, query
 * strings, `--flag=value`) where the name says secret: judged word by word after folding, so
 * `userPassword`, `X-Amz-Signature`, `client_secret`, `pаssword` and `ＰＡＳＳＷＯＲＤ` all count.
 * Values of unknown names are left to the entropy scanner, which finds random ones anywhere.
 */
export const secretPairScanner: Scanner = {
  id: 'secret_pair',
  allOf: F_ASSIGN,
  anyOf: 0,
  minLength: 5,
  minDigits: 0,
  minRun: 0,
  minAlnum: 0,
  // A name is part of the text: a text with no hint anywhere has no name with one (`task:1000`,
  // a timestamp, `step=charge order=42`), and one search for the hints costs less than finding
  // every name.
  mayMatch: (text) => HINT.test(text),
  scan(text, sink) {
    return replaceSpans(NAME, text, (m) => {
      const rawName = m[2]!;
      const name = rawName.length > MAX_NAME ? rawName.slice(-MAX_NAME) : rawName;
      if (!HINT.test(name)) return undefined;
      const kind = secretNameKind(name);
      if (kind === undefined) return undefined;
      const from = m.index + m[0].length;
      // `password: correct horse battery staple` (YAML, prose) may hold spaces; `password=x rejected`
      // (a log line's key=value) holds one word, unless the name says it is a phrase.
      const phrase = kind === 'strong' && (m[0].includes(':') || /phrase/i.test(name));
      const value = pairValue(text, from, kind === 'strong', phrase);
      const rule = classify(kind, name, text.slice(value.start, value.end));
      if (rule === undefined) return undefined;
      sink.hit(rule);
      return { start: value.start, end: value.end, replacement: marker(rule), resume: Math.max(value.end, from) };
    });
  },
};
