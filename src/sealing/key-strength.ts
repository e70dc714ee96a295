/** Fewest bytes a keyring secret may have: 256 bits. */
export const MIN_SECRET_BYTES = 32;
/** Fewest distinct byte values in a secret; 32 random bytes have about 30. */
const MIN_DISTINCT_BYTES = 12;

/**
 * Why a secret is too weak to key the keyring, or undefined when it is fit. Refuses secrets
 * that are short, that use few distinct bytes (`aaaa…`, `0101…`), that repeat a shorter block
 * (`hunter2hunter2…`) or that step by a constant (`0123…`, `abcd…`). These catch the keys people
 * type by hand or copy from examples; they cannot prove a key random, and do not try.
 */
export function weakSecretReason(secret: Uint8Array): string | undefined {
  if (secret.length < MIN_SECRET_BYTES) {
    return `is ${secret.length} bytes; at least ${MIN_SECRET_BYTES} are required`;
  }
  const distinct = new Set(secret).size;
  if (distinct < MIN_DISTINCT_BYTES) {
    return `uses only ${distinct} distinct byte values (at least ${MIN_DISTINCT_BYTES})`;
  }
  const period = shortestPeriod(secret);
  if (period <= secret.length / 2) return `repeats a block of ${period} bytes`;
  if (constantStep(secret)) return 'is a sequence with a constant step';
  return undefined;
}

/** The shortest p such that s[i] = s[i + p] for all i (Knuth–Morris–Pratt failure function): linear. */
function shortestPeriod(s: Uint8Array): number {
  const fail = new Int32Array(s.length);
  let k = 0;
  for (let i = 1; i < s.length; i++) {
    while (k > 0 && s[i] !== s[k]) k = fail[k - 1] as number;
    if (s[i] === s[k]) k++;
    fail[i] = k;
  }
  return s.length - (fail[s.length - 1] as number);
}

function constantStep(s: Uint8Array): boolean {
  const step = ((s[1] as number) - (s[0] as number) + 256) % 256;
  for (let i = 2; i < s.length; i++) {
    if (((s[i] as number) - (s[i - 1] as number) + 256) % 256 !== step) return false;
  }
  return true;
}
