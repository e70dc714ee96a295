import { randomRun } from './randomness.js';
import { replaceMatches } from './replace-matches.js';
import { marker, type Scanner } from './scanner.js';
import { alnumRun, F_DASH, F_SLASH } from './text-features.js';

/**
 * A run of token characters (base64, base64url, `_` and `-` separated ids) of 20 or more, with
 * its padding. The look-behind starts a match only at the beginning of a run and nothing follows
 * the run in the pattern, so each run is walked once.
 */
const RUN = /(?<![A-Za-z0-9+/_-])[A-Za-z0-9+/_-]{20,}={0,3}/g;
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

/** A whole value that is a UUID (ids are the most common long runs of all), told without a regex. */
function isUuid(text: string): boolean {
  if (text.length !== 36) return false;
  for (let i = 0; i < 36; i++) {
    const c = text.charCodeAt(i) | 32;
    if (i === 8 || i === 13 || i === 18 || i === 23) {
      if (c !== 45) return false;
    } else if (!((c >= 48 && c <= 57) || (c >= 97 && c <= 102))) return false;
  }
  return true;
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
    if (isUuid(text)) return text;
    return replaceMatches(RUN, text, ([m]) => {
      if (!tokenLike(m)) return m;
      sink.hit('high_entropy');
      return marker('high_entropy');
    });
  },
};
