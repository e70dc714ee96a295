/**
 * `text.replace(re, fn)` for a global regex, as an exec loop: about half the cost when nothing
 * matches (the common case for every scanner), and the same string back when `fn` keeps every
 * match as it is. The regexes are module-level and scans are synchronous, so sharing `lastIndex`
 * is safe. None of the scanners' patterns can match the empty string.
 */
export function replaceMatches(re: RegExp, text: string, fn: (m: RegExpExecArray) => string): string {
  re.lastIndex = 0;
  let m = re.exec(text);
  if (m === null) return text;
  let out = '';
  let last = 0;
  let changed = false;
  do {
    const replacement = fn(m);
    if (replacement !== m[0]) {
      out += text.slice(last, m.index) + replacement;
      last = m.index + m[0].length;
      changed = true;
    }
    m = re.exec(text);
  } while (m !== null);
  return changed ? out + text.slice(last) : text;
}

/**
 * What {@link replaceSpans} does at one match: replace the span `[start, end)` of the text (which
 * need not be the match: a pair's value after its name, a card inside a longer digit run) and
 * search on from `resume`; only search on from the index returned; or, with `undefined`, keep
 * the text and search on after the match.
 */
export type SpanStep = { start: number; end: number; replacement: string; resume: number } | number | undefined;

/**
 * The exec loop of the scanners that decide in code what to replace and where to search on.
 * Spans must not overlap and come in order (each `start` at or after the previous `end`); the
 * same string comes back when nothing was replaced.
 */
export function replaceSpans(re: RegExp, text: string, step: (m: RegExpExecArray) => SpanStep): string {
  re.lastIndex = 0;
  let out = '';
  let last = 0;
  for (let m = re.exec(text); m !== null; m = re.exec(text)) {
    const next = step(m);
    if (next === undefined) continue;
    if (typeof next === 'number') {
      re.lastIndex = next;
      continue;
    }
    out += text.slice(last, next.start) + next.replacement;
    last = next.end;
    re.lastIndex = next.resume;
  }
  return last === 0 ? text : out + text.slice(last);
}
