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
