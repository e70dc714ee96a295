import type { HitSink } from '../scanners/index.js';
import type { PolicyEngine } from './policy-engine.js';

/** How far back from the limit a cut may move to land on whitespace. */
const MAX_BACKTRACK = 4096;

function isSpace(c: number): boolean {
  return c === 32 || c === 10 || c === 13 || c === 9;
}

/**
 * Scans a free text (an error message, a stack, a log message), cutting it at the policy's
 * string limit first. The cut moves back to whitespace so that no token is split into a half
 * the scanners no longer recognise; a text without whitespace near the limit loses the whole run
 * (fail closed).
 */
export function scanBounded(engine: PolicyEngine, text: string, sink: HitSink): string {
  const max = engine.limits.maxStringLength;
  if (text.length <= max) return engine.scanner.scan(text, sink);
  const previous = previousCut(text, max);
  if (previous >= 0) return engine.scanner.scan(text.slice(0, previous), sink) + text.slice(previous);
  let cut = max;
  while (cut > 0 && max - cut < MAX_BACKTRACK && !isSpace(text.charCodeAt(cut))) cut--;
  if (!isSpace(text.charCodeAt(cut))) cut = 0;
  sink.hit('limit.truncated');
  return `${engine.scanner.scan(text.slice(0, cut), sink)}…[truncated ${text.length - cut} chars]`;
}

const TRUNCATED = '…[truncated ';
const TRUNCATED_TAIL = /^…\[truncated \d{1,16} chars\]$/;
/** Markers may be longer than what they replace, so a cut text can exceed the limit a little. */
const SLACK = 4096;

/**
 * Where an earlier cut's marker starts, when `text` is the output of an earlier cut (so that
 * scrubbing it again does not cut it again: idempotence); -1 otherwise.
 */
function previousCut(text: string, max: number): number {
  if (text.length > max + SLACK) return -1;
  const at = text.lastIndexOf(TRUNCATED);
  return at >= 0 && TRUNCATED_TAIL.test(text.slice(at)) ? at : -1;
}

/** A sink that drops hits, for callers that want only the scrubbed text. */
export const NO_HITS: HitSink = { hit() {} };
