/**
 * A set of words written as one whitespace-separated list, so that long vocabularies read as
 * text rather than one quoted string per line.
 *
 * @example wordSet('password passwd secret') // Set { 'password', 'passwd', 'secret' }
 */
export function wordSet(words: string): ReadonlySet<string> {
  return new Set(words.split(/\s+/).filter((w) => w.length > 0));
}
