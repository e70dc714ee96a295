import { foldText } from './fold-text.js';
import type { HitSink, Scanner } from './scanner.js';
import { alnumRun, DIGITS_MASK, digitRun, F_NONASCII, textFeatures } from './text-features.js';

/** Shorter texts cannot hold anything the scanners look for (the shortest is `a@b.io`). */
const MIN_LENGTH = 6;
/** Below this only an e-mail address fits (the next shortest match is `pwd=abcd`). */
const ONLY_EMAIL_BELOW = 8;
/**
 * Passes until the text no longer changes. Replacing one match changes the neighbourhood of the
 * next (`(415) 555-0199 4539…`: the phone's digits ran into the card's), so a second pass can find
 * what the first could not; running to a fixed point makes redaction idempotent by construction.
 * In practice the second pass finds nothing; this bound is never reached by real text.
 */
const MAX_PASSES = 4;
/** What a text becomes when the passes do not settle (fail closed). */
const UNSTABLE = '[redacted:unstable]';

/** One pass of every scanner whose pre-conditions hold; the same string when nothing matched. */
function scanOnce(text: string, scanners: readonly Scanner[], sink: HitSink, initial: number): string {
  let out = text;
  let features = initial;
  for (let i = 0; i < scanners.length; i++) {
    const s = scanners[i]!;
    if (
      out.length < s.minLength ||
      (features & DIGITS_MASK) < s.minDigits ||
      digitRun(features) < s.minRun ||
      alnumRun(features) < s.minAlnum ||
      (features & s.allOf) !== s.allOf ||
      (s.anyOf !== 0 && (features & s.anyOf) === 0) ||
      (s.gate !== undefined && !s.gate(features)) ||
      (s.mayMatch !== undefined && !s.mayMatch(out))
    ) {
      continue;
    }
    const next = s.scan(out, sink, features);
    if (next !== out) {
      out = next;
      features = textFeatures(out);
    }
  }
  return out;
}

/**
 * Runs the scanners over one text until it is a fixed point. Features are computed once per pass
 * and again only after a scanner changed the text; each scanner's pre-conditions are plain number
 * comparisons, so a clean text costs one character loop and a few comparisons, and a single pass.
 * Returns the same string when nothing matched.
 */
export function scanText(text: string, scanners: readonly Scanner[], sink: HitSink): string {
  if (text.length < MIN_LENGTH || (text.length < ONLY_EMAIL_BELOW && !text.includes('@'))) return text;
  // Full-width digits, no-break spaces and Unicode dashes are scanned as their ASCII forms; a text
  // in which nothing is found comes back as written (see foldText).
  let features = textFeatures(text);
  const folded = features & F_NONASCII ? foldText(text) : text;
  if (folded !== text) features = textFeatures(folded);
  let out = folded;
  for (let pass = 0; pass < MAX_PASSES; pass++) {
    const next = scanOnce(out, scanners, sink, features);
    if (next === out) return out === folded ? text : out;
    out = next;
    features = textFeatures(out);
  }
  sink.hit('limit.unstable');
  return UNSTABLE;
}
