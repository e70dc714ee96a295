/**
 * Look-alike characters a text may use to slip a secret past the scanners: full-width forms
 * (`４５３９`, `＠`), the many Unicode spaces (no-break, thin, ideographic) and dashes. Each is
 * mapped to one ASCII character, so a folded text has the same length as the original.
 */
function foldChar(c: number): number {
  if (c >= 0xff01 && c <= 0xff5e) return c - 0xfee0; // full-width ASCII
  if (c === 0x00a0 || c === 0x3000 || c === 0x202f || c === 0x205f || c === 0x180e) return 32;
  if (c >= 0x2000 && c <= 0x200a) return 32;
  if ((c >= 0x2010 && c <= 0x2015) || c === 0x2212 || c === 0xfe63) return 45;
  return c;
}

/**
 * The text with look-alike characters replaced by their ASCII form, or the same string when it
 * holds none. The scanners run on the folded text; a text in which they find nothing is returned
 * as it was written, so folding never changes readable text.
 */
export function foldText(text: string): string {
  let i = 0;
  for (; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c >= 128 && foldChar(c) !== c) break;
  }
  if (i === text.length) return text;
  const codes = new Array<number>(text.length);
  for (let j = 0; j < text.length; j++) codes[j] = foldChar(text.charCodeAt(j));
  // Built in chunks: fromCharCode with a huge argument list overflows the stack.
  let out = '';
  for (let j = 0; j < codes.length; j += 8192) out += String.fromCharCode(...codes.slice(j, j + 8192));
  return out;
}
