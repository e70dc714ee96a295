import { ALL_SCANNERS } from './all-scanners.js';
import { type CustomScannerInput, compileCustomScanner } from './custom-scanner.js';
import { scanText } from './scan-text.js';
import { type HitSink, marker, type Scanner, type ScannerId } from './scanner.js';

/**
 * What the audit trail's redaction and the logs use of the scanners: a text in, the text with
 * each finding replaced by a marker out (`[redacted:jwt]`), each finding told to `hits` by its
 * rule id (`jwt`, `card`; the trail's receipt records it as `scan.jwt`). It returns the very
 * same string when it found nothing. It sees every string a policy keeps (values, object keys,
 * error messages and stacks, log messages), so it should cost little on clean text and never
 * throw; one that throws, or returns no string, loses the whole text (`[redacted:<id>]`).
 *
 * @example
 * const acme: ValueScanner = {
 *   scan(text, hits) {
 *     const out = text.replace(/ACME-[0-9]{8}/g, () => (hits.hit('acme_ticket'), '[redacted:acme_ticket]'));
 *     return DEFAULT_VALUE_SCANNER.scan(out, hits); // and the built-in ones after
 *   },
 * };
 */
export interface ValueScanner {
  scan(text: string, hits: HitSink): string;
}

/** The built-in scanners, in order, run to a fixed point (see `scanText`). */
export const DEFAULT_VALUE_SCANNER: ValueScanner = listScanner(ALL_SCANNERS);

/** The id a replacing scanner is listed and its failures reported under. */
export const REPLACED_SCANNER_ID = 'value_scanner';

function listScanner(scanners: readonly Scanner[]): ValueScanner {
  return { scan: (text, hits) => scanText(text, scanners, hits) };
}

/** A scanner of the user's, failing closed: a throw or a non-string loses the text. */
function guarded(scanner: ValueScanner): ValueScanner {
  return {
    scan(text, hits) {
      let out: unknown;
      try {
        out = scanner.scan(text, hits);
      } catch {
        out = undefined;
      }
      if (typeof out === 'string') return out;
      hits.hit(REPLACED_SCANNER_ID);
      return marker(REPLACED_SCANNER_ID);
    },
  };
}

/** What a policy scans with, and the ids it lists (its own scanners first). */
export type PolicyScanner = { scanner: ValueScanner; ids: readonly string[] };

/**
 * A policy's scanner: its own scanners first, then the built-in ones it leaves enabled, run
 * together to a fixed point; or, given `replacement`, its own scanners and then the replacement
 * (in place of every built-in one).
 */
export function policyScanner(
  own: readonly CustomScannerInput[],
  disabled: readonly ScannerId[],
  replacement?: ValueScanner,
): PolicyScanner {
  const mine = own.map(compileCustomScanner);
  const ids = mine.map((s) => s.id);
  if (replacement !== undefined) {
    const theirs = guarded(replacement);
    const scanner: ValueScanner =
      mine.length === 0 ? theirs : { scan: (text, hits) => theirs.scan(scanText(text, mine, hits), hits) };
    return { scanner, ids: [...ids, REPLACED_SCANNER_ID] };
  }
  const off = new Set<string>(disabled);
  const scanners = [...mine, ...ALL_SCANNERS.filter((s) => !off.has(s.id))];
  const scanner = off.size === 0 && mine.length === 0 ? DEFAULT_VALUE_SCANNER : listScanner(scanners);
  return { scanner, ids: scanners.map((s) => s.id) };
}
