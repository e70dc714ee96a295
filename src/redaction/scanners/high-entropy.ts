import { randomBase64, randomRun } from './randomness.js';
import { replaceMatches } from './replace-matches.js';
import { marker, type Scanner } from './scanner.js';
import { alnumRun, F_SLASH } from './text-features.js';

/**
 * A run of token characters (base64, base64url, `_` and `-` separated ids) of 20 or more, with
 * its padding. The look-behind starts a match only at the beginning of a run and nothing follows
 * the run in the pattern, so each run is walked once.
 */
const RUN = /(?<![A-Za-z0-9+/_-])[A-Za-z0-9+/_-]{20,}={0,3}/g;
const BASE64_ONLY = /^[A-Za-z0-9+/]+={0,3}$/;

/** True when a segment between `+ / _ -` looks random, or the run is base64 that does as a whole. */
export function tokenLike(run: string): boolean {
  let start = 0;
  for (let i = 0; i <= run.length; i++) {
    const c = i < run.length ? run.charCodeAt(i) : 61;
    if (c === 43 || c === 47 || c === 95 || c === 45 || c === 61) {
      if (i - start >= 20 && randomRun(run, start, i)) return true;
      start = i + 1;
    }
  }
  // Without `+` or `/` the run was one segment, judged above.
  return run.length >= 32 && (run.includes('+') || run.includes('/')) && BASE64_ONLY.test(run) && randomBase64(run);
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
  minAlnum: 16,
  // A segment of 20, or a base64 run (with `+` or `/`) whose segments are shorter.
  gate: (f) => alnumRun(f) >= 20 || (f & F_SLASH) !== 0,
  scan(text, sink) {
    return replaceMatches(RUN, text, ([m]) => {
      if (!tokenLike(m)) return m;
      sink.hit('high_entropy');
      return marker('high_entropy');
    });
  },
};
