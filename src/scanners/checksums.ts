/** ISO 13616 check of a compact upper-case IBAN: the rearranged number mod 97 is 1. */
export function ibanValid(iban: string): boolean {
  const rearranged = iban.slice(4) + iban.slice(0, 4);
  let rest = 0;
  for (let i = 0; i < rearranged.length; i++) {
    const c = rearranged.charCodeAt(i);
    if (c >= 48 && c <= 57) rest = (rest * 10 + (c - 48)) % 97;
    else if (c >= 65 && c <= 90) rest = (rest * 100 + (c - 55)) % 97;
    else return false;
  }
  return rest === 1;
}

/** Shannon entropy in bits per character: about 4 for random base62, under 3 for words. */
export function shannonEntropy(text: string): number {
  if (text.length === 0) return 0;
  const counts = new Map<number, number>();
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    counts.set(c, (counts.get(c) ?? 0) + 1);
  }
  let bits = 0;
  for (const n of counts.values()) {
    const p = n / text.length;
    bits -= p * Math.log2(p);
  }
  return bits;
}
