/** Where a `name=value` value ends, and whether it was quoted. */
export type PairValue = { start: number; end: number; quote: string };

/** Characters that end an unquoted value. */
function ends(c: number): boolean {
  return (
    c === 32 ||
    c === 9 ||
    c === 10 ||
    c === 13 ||
    c === 34 || // "
    c === 39 || // '
    c === 96 || // `
    c === 44 || // ,
    c === 59 || // ;
    c === 38 || // &
    c === 60 || // <
    c === 62 || // >
    c === 40 ||
    c === 41 ||
    c === 91 ||
    c === 93 ||
    c === 123 ||
    c === 125 ||
    c === 92 // backslash
  );
}

const MAX_QUOTED = 4096;
/** How many more words a passphrase may have after its first (`correct horse battery staple`). */
const MAX_EXTRA_WORDS = 8;

/** End of the quoted value that starts after `quote` at `from`: the closing quote, else the line's end. */
function quotedEnd(text: string, from: number, quote: string): number {
  const limit = Math.min(text.length, from + MAX_QUOTED);
  if (quote.length === 2) {
    const close = text.indexOf(quote, from);
    return close >= 0 && close <= limit ? close : lineEnd(text, from, limit);
  }
  const q = quote.charCodeAt(0);
  for (let i = from; i < limit; i++) {
    const c = text.charCodeAt(i);
    if (c === 92) i++;
    else if (c === q || c === 10 || c === 13) return i;
  }
  return limit;
}

function lineEnd(text: string, from: number, limit: number): number {
  for (let i = from; i < limit; i++) {
    const c = text.charCodeAt(i);
    if (c === 10 || c === 13) return i;
  }
  return limit;
}

function wordEnd(text: string, from: number, strong: boolean): number {
  let i = from;
  while (i < text.length) {
    const c = text.charCodeAt(i);
    // A strong secret (`pwd=a,b;c`) runs through `,` and `;` that are not followed by a space.
    if ((c === 44 || c === 59) && strong) {
      const d = text.charCodeAt(i + 1);
      if (i + 1 < text.length && !ends(d)) {
        i++;
        continue;
      }
    }
    if (ends(c)) break;
    i++;
  }
  return i;
}

/**
 * The value after a `name=` / `name: ` at `from`. Quoted values run to their closing quote (an
 * unterminated one to the end of the line: fail closed). Unquoted values are one word; with
 * `phrase` (`password: correct horse battery staple`) further words on the same line join it,
 * until one that starts another pair (`host=db`) or a sentence ends.
 */
export function pairValue(text: string, from: number, strong: boolean, phrase = strong): PairValue {
  const c = text.charCodeAt(from);
  if (c === 34 || c === 39) {
    const quote = text.charAt(from);
    return { start: from + 1, end: quotedEnd(text, from + 1, quote), quote };
  }
  if (c === 92) {
    // An escaped quote, at any depth of escaping (`\"`, `\\\"` in JSON inside JSON).
    let k = from;
    while (text.charCodeAt(k) === 92 && k - from < 8) k++;
    const q = text.charCodeAt(k);
    if (q === 34 || q === 39) {
      const quote = text.slice(from, k + 1);
      return { start: k + 1, end: quotedEnd(text, k + 1, quote), quote };
    }
  }
  let end = wordEnd(text, from, strong);
  if (!phrase || end === from) return { start: from, end, quote: '' };
  for (let words = 0; words < MAX_EXTRA_WORDS; words++) {
    const last = text.charCodeAt(end - 1);
    if (last === 46 || last === 33 || last === 63) break; // the sentence ended
    let next = end;
    while (text.charCodeAt(next) === 32 || text.charCodeAt(next) === 9) next++;
    if (next === end || next >= text.length) break;
    const stop = wordEnd(text, next, false);
    if (stop === next) break;
    const word = text.slice(next, stop);
    if (word.includes('=') || word.endsWith(':') || word.startsWith('[redacted')) break;
    end = stop;
  }
  // A full stop after the last word ends the sentence; it is not part of the secret.
  while (end > from + 1 && text.charCodeAt(end - 1) === 46) end--;
  return { start: from, end, quote: '' };
}
