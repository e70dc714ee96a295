import type { HitSink, Scanner } from './scanner.js';
import { DIGITS_MASK, textFeatures } from './text-features.js';

/** Shorter texts cannot hold anything the scanners look for (the shortest is `a@b.io`). */
const MIN_LENGTH = 6;

/**
 * Runs the scanners over one text. Features are computed once, and again only after a scanner
 * changed the text; each scanner's pre-conditions are plain number comparisons, so a clean text
 * costs one character loop and a few comparisons. Returns the same string when nothing matched.
 */
export function scanText(text: string, scanners: readonly Scanner[], sink: HitSink): string {
  if (text.length < MIN_LENGTH) return text;
  let out = text;
  let features = textFeatures(text);
  for (let i = 0; i < scanners.length; i++) {
    const s = scanners[i]!;
    if (
      out.length < s.minLength ||
      (features & DIGITS_MASK) < s.minDigits ||
      (features & s.allOf) !== s.allOf ||
      (s.anyOf !== 0 && (features & s.anyOf) === 0) ||
      (s.mayMatch !== undefined && !s.mayMatch(out))
    ) {
      continue;
    }
    const next = s.scan(out, sink);
    if (next !== out) {
      out = next;
      features = textFeatures(out);
    }
  }
  return out;
}
