import { replaceSpans } from './replace-matches.js';
import { type HitSink, marker, type Scanner } from './scanner.js';

/**
 * A policy's own scanner: a regular expression (every match becomes `[redacted:<id>]`) or a
 * function that returns the text with its findings replaced. It runs before the built-in
 * scanners, on every string, so its findings are named by its id.
 *
 * The policy's author answers for its cost: a pattern with nested quantifiers can take
 * exponential time, and nothing here can bound that.
 *
 * @example { id: 'acme_ticket', pattern: /ACME-[0-9]{8}/g }
 * @example { id: 'vault_token', scan: (text) => text.replace(/hvs\.[A-Za-z0-9]{24,}/g, '[redacted:vault_token]') }
 */
export type CustomScannerInput = { id: string; pattern: RegExp } | { id: string; scan: (text: string) => string };

function patternScanner(id: string, pattern: RegExp): Scanner['scan'] {
  const re = new RegExp(pattern.source, pattern.flags.includes('g') ? pattern.flags : `${pattern.flags}g`);
  const replacement = marker(id);
  return (text, sink) =>
    replaceSpans(re, text, (m) => {
      const end = m.index + m[0].length;
      if (end === m.index) return end + 1;
      if (m[0] === replacement) return undefined;
      sink.hit(id);
      return { start: m.index, end, replacement, resume: end };
    });
}

function functionScanner(id: string, scan: (text: string) => string): Scanner['scan'] {
  return (text: string, sink: HitSink) => {
    let out: unknown;
    try {
      out = scan(text);
    } catch {
      // A scanner that fails cannot vouch for the text: drop it (fail closed).
      out = undefined;
    }
    if (out === text) return text;
    sink.hit(id);
    return typeof out === 'string' ? out : marker(id);
  };
}

/** Compiles a policy's own scanner; it has no pre-conditions, so it sees every string. */
export function compileCustomScanner(input: CustomScannerInput): Scanner {
  return {
    id: input.id,
    allOf: 0,
    anyOf: 0,
    minLength: 0,
    minDigits: 0,
    minRun: 0,
    minAlnum: 0,
    scan: 'pattern' in input ? patternScanner(input.id, input.pattern) : functionScanner(input.id, input.scan),
  };
}
