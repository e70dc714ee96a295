/**
 * Cyrillic and Greek letters that look like Latin ones, mapped to the Latin letter (lower case).
 * Field names are compared after this map, so `pаssword` with a Cyrillic `а` is `password`. Only
 * names are folded this way; text keeps its letters.
 */
const PAIRS =
  // Cyrillic lower and upper case
  'аaеeоoрpсcуyхxіiјjѕsԁdһhԛqԝwғfкkмmнhтtвbьbАaВbЕeКkМmНhОoРpСcТtХxУyІiЈjЅsԚqԜw' +
  // Greek lower and upper case
  'αaοoρpνvιiκkυuχxεeτtΑaΒbΕeΖzΗhΙiΚkΜmΝnΟoΡpΤtΥyΧx' +
  // Latin letters NFKD does not decompose
  'ıiłlđdøoßsæeœe';

const MAP: ReadonlyMap<string, string> = new Map(
  Array.from({ length: PAIRS.length / 2 }, (_, i) => [PAIRS[2 * i]!, PAIRS[2 * i + 1]!] as const),
);

/** `c` as the Latin letter it looks like, or `c` itself. */
export function unconfuse(c: string): string {
  return MAP.get(c) ?? c;
}
