/**
 * Whether letters and digits look drawn at random: hex with letters and digits; upper and lower
 * case in like numbers (not one capital per word as in CamelCase); a change of class (lower,
 * upper, digit) at least once every three characters, between letters and digits once every
 * four, or once every four when all three classes occur (base62, base64). Shared by the names an
 * error may show (`clean-name.ts`) and the audit trail's identifier grammar.
 */
export function looksRandom(
  length: number,
  letters: number,
  digits: number,
  uppers: number,
  hexLetters: number,
  caseSwitches: number,
  mixSwitches: number,
): boolean {
  const switches = caseSwitches + mixSwitches;
  return (
    (digits > 0 && letters > 0 && hexLetters === letters) ||
    (uppers * 5 >= letters && (letters - uppers) * 5 >= letters && letters > 0) ||
    switches * 3 >= length ||
    mixSwitches * 4 >= length ||
    (digits > 0 && uppers > 0 && uppers < letters && switches * 4 >= length)
  );
}

/** a-f / A-F. */
export const isHexLetter = (c: number): boolean => (c >= 97 && c <= 102) || (c >= 65 && c <= 70);

/**
 * `looksRandom` of one word of ASCII letters and digits (`AiZDWmzLpWAdqLMQAbuu` yes,
 * `maxRetriesPerRequest` no). Other characters count as neither.
 */
export function wordLooksRandom(word: string): boolean {
  let letters = 0;
  let digits = 0;
  let uppers = 0;
  let hex = 0;
  let caseSwitches = 0;
  let mixSwitches = 0;
  let previous = 0; // 1 lower, 2 upper, 3 digit
  for (let i = 0; i < word.length; i++) {
    const c = word.charCodeAt(i);
    const cls = c >= 97 && c <= 122 ? 1 : c >= 65 && c <= 90 ? 2 : c >= 48 && c <= 57 ? 3 : 0;
    if (cls === 0) continue;
    if (cls === 3) digits++;
    else {
      letters++;
      if (cls === 2) uppers++;
      if (isHexLetter(c)) hex++;
    }
    if (previous !== 0 && cls !== previous) {
      if (cls === 3 || previous === 3) mixSwitches++;
      else caseSwitches++;
    }
    previous = cls;
  }
  return looksRandom(letters + digits, letters, digits, uppers, hex, caseSwitches, mixSwitches);
}
