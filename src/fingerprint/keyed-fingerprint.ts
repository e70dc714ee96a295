import { canonicalJson } from './canonical-json.js';

/** What a keyed fingerprint needs of a keyring (the sealing keyring is one): its current key id and a MAC under a key. */
export type FingerprintKeys = { readonly currentId: string; fingerprintMac(data: string, keyId: string): string };

const PREFIX = 'fp1:';

/**
 * The ledger's fingerprint of an operation's effect-bearing input: HMAC-SHA-256 under a keyring
 * key of the operation name and the RFC 8785 canonical JSON of the fields, as
 * `fp1:<keyId>:<base64url>`. Keyed, so a low-entropy input (a PIN, the last digits of an
 * identifier) cannot be recovered from a stored fingerprint by trying every value; the key id is
 * part of it, so after a rotation a stored fingerprint is recomputed with the key that made it.
 *
 * @example
 * keyedFingerprint(keyring, 'payments.charge', { amount: 500, currency: 'EUR' })
 * // 'fp1:k1:Qm9…'
 */
export function keyedFingerprint(
  keyring: FingerprintKeys,
  operation: string,
  effect: unknown,
  keyId: string = keyring.currentId,
): string {
  return `${PREFIX}${keyId}:${keyring.fingerprintMac(`${operation}\n${canonicalJson(effect)}`, keyId)}`;
}

/** The key id a keyed fingerprint was made with, or undefined for any other string. */
export function fingerprintKeyId(fp: string): string | undefined {
  if (!fp.startsWith(PREFIX)) return undefined;
  const end = fp.indexOf(':', PREFIX.length);
  return end > PREFIX.length ? fp.slice(PREFIX.length, end) : undefined;
}
