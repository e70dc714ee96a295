import { randomRun } from './randomness.js';
import { marker, type Scanner } from './scanner.js';
import { alnumRun, F_DASH, F_SLASH } from './text-features.js';

/** Token characters: base64, base64url, `_` and `-` separated ids. */
const RUN_CHAR = (() => {
  const t = new Uint8Array(128);
  for (const c of 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/_-') t[c.charCodeAt(0)] = 1;
  return t;
})();
const MIN_RUN = 20;
const MAX_PADDING = 3;

function isRunChar(c: number): boolean {
  return c < 128 && RUN_CHAR[c] === 1;
}

/**
 * Each whole run of token characters of {@link MIN_RUN} or more, with up to three `=` of padding,
 * replaced by `fn`'s answer. A plain loop, walking each character once: a regex's greedy repeat
 * over one run of many megabytes exhausts V8's backtracking stack (a RangeError), a loop does not.
 */
function replaceRuns(text: string, fn: (run: string) => string): string {
  let out = '';
  let last = 0;
  let i = 0;
  const n = text.length;
  while (i < n) {
    if (!isRunChar(text.charCodeAt(i))) {
      i++;
      continue;
    }
    const start = i;
    while (i < n && isRunChar(text.charCodeAt(i))) i++;
    if (i - start < MIN_RUN) continue;
    let end = i;
    while (end < n && end - i < MAX_PADDING && text.charCodeAt(end) === 61) end++;
    const run = text.slice(start, end);
    const replacement = fn(run);
    if (replacement !== run) {
      out += text.slice(last, start) + replacement;
      last = end;
    }
    i = end;
  }
  return last === 0 ? text : out + text.slice(last);
}

function isSeparator(c: number): boolean {
  return c === 43 || c === 47 || c === 95 || c === 45 || c === 61;
}

/** A segment of letters of one case only: a word (`worker`, `live`, `ch`), not a piece of a key. */
function isWord(run: string, from: number, to: number): boolean {
  let lower = false;
  let upper = false;
  for (let i = from; i < to; i++) {
    const c = run.charCodeAt(i);
    if (c >= 97 && c <= 122) lower = true;
    else if (c >= 65 && c <= 90) upper = true;
    else return false;
  }
  return !(lower && upper);
}

/**
 * Where the body of a run starts after up to two short lower-case prefixes (`ch_`, `cus_`,
 * `sk_live_`): an id's prefix is not part of its randomness, so `ch_` and 18 random characters
 * is judged as 18 (an id), not 20.
 */
function prefixEnd(run: string): number {
  let at = 0;
  for (let words = 0; words < 2; words++) {
    let i = at;
    while (i < run.length && i - at <= 5 && isLower(run.charCodeAt(i))) i++;
    const c = run.charCodeAt(i);
    if (i === at || i - at > 5 || (c !== 95 && c !== 45)) break;
    at = i + 1;
  }
  return at;
}

function isLower(c: number): boolean {
  return c >= 97 && c <= 122;
}

/** Per ASCII code: 1 a digit, 2 a lower-case hex letter, 4 an upper-case one, 0 anything else. */
const HEX_CLASS = (() => {
  const t = new Uint8Array(128);
  for (let c = 48; c <= 57; c++) t[c] = 1;
  for (let c = 97; c <= 102; c++) t[c] = 2;
  for (let c = 65; c <= 70; c++) t[c] = 4;
  return t;
})();

/** A whole value that is a UUID (ids are the most common long runs of all), told without a regex. */
function isUuid(text: string): boolean {
  if (text.length !== 36) return false;
  for (let i = 0; i < 36; i++) {
    const c = text.charCodeAt(i);
    if (i === 8 || i === 13 || i === 18 || i === 23) {
      if (c !== 45) return false;
    } else if ((c < 128 ? HEX_CLASS[c]! : 0) === 0) return false;
  }
  return true;
}

/**
 * A whole value of hex digits of one case (a digest, a commit id), told in one loop with one
 * branch a character (digits and letters alternate at random in hex): such a run is never judged
 * random (see `randomRun`), so it needs no run found and no classes counted.
 */
function isHex(text: string): boolean {
  let seen = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    const k = c < 128 ? HEX_CLASS[c]! : 0;
    if (k === 0) return false;
    seen |= k;
  }
  return (seen & 6) !== 6;
}

/**
 * True when a segment between `+ / _ -` looks random, or the run does as a whole once its
 * prefix and its words are left out: base64 and base64url cut a key into pieces at random places, while
 * `t_worker_process_23b62ed0`, `ch_` and 18 characters, or `export_2024-06-01` are words and
 * an id whose random part is short.
 */
export function tokenLike(run: string): boolean {
  let start = 0;
  let segments = 0;
  let pieces = '';
  const body = prefixEnd(run);
  for (let i = 0; i <= run.length; i++) {
    if (i < run.length && !isSeparator(run.charCodeAt(i))) continue;
    if (i > start) {
      segments++;
      if (i - start >= 20 && randomRun(run, start, i)) return true;
      // Words of four letters or more are words; shorter letter runs are as likely a key's piece.
      if (start >= body && !(i - start >= 4 && isWord(run, start, i))) pieces += run.slice(start, i);
    }
    start = i + 1;
  }
  // One segment was judged whole above.
  return segments > 1 && pieces.length >= 20 && randomRun(pieces, 0, pieces.length);
}

/**
 * Keys and tokens of any vendor, by structure: a long run that looks random (see `randomRun`).
 * The whole run goes, prefix included (`acme_live_…`), since a prefix and a partial body can be
 * enough to find the rest. UUIDs, hex digests, commit ids, paths, order ids and words stay.
 */
export const highEntropyScanner: Scanner = {
  id: 'high_entropy',
  allOf: 0,
  anyOf: 0,
  minLength: 20,
  minDigits: 0,
  minRun: 0,
  minAlnum: 8,
  // A segment of 20, or a run whose separators (`+ / _ -`) cut it into shorter ones.
  gate: (f) => alnumRun(f) >= 20 || (f & (F_SLASH | F_DASH)) !== 0,
  scan(text, sink) {
    if (isUuid(text) || isHex(text)) return text;
    return replaceRuns(text, (m) => {
      if (!tokenLike(m)) return m;
      sink.hit('high_entropy');
      return marker('high_entropy');
    });
  },
};
