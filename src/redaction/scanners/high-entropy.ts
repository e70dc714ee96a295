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
/**
 * True when a segment between `+ / _ -` looks random, or a long run does as a whole (base64 and
 * base64url split a key into short pieces at random places; a kebab-case name or a path of words
 * does not look random however it is joined).
 */
export function tokenLike(run: string): boolean {
  let start = 0;
  let segments = 0;
  for (let i = 0; i <= run.length; i++) {
    const c = i < run.length ? run.charCodeAt(i) : 61;
    if (c === 43 || c === 47 || c === 95 || c === 45 || c === 61) {
      if (i > start) segments++;
      if (i - start >= 20 && randomRun(run, start, i)) return true;
      start = i + 1;
    }
  }
  // One segment (a digest, a word run) was judged whole above.
  if (segments <= 1) return false;
  return randomRun(run, prefixEnd(run), run.length);
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
