import { canonicalJson } from './canonical-json.js';
import { sha256 } from './sha256.js';

/**
 * SHA-256 (hex) of the RFC 8785 canonical JSON of the effect-bearing input, prefixed by the
 * operation name so two operations with equal fields never share a fingerprint.
 * Key order does not matter; any change of an effect field changes the fingerprint.
 *
 * @example
 * fingerprint('payments.charge', { amount: 500, currency: 'EUR', customer: 'c_1' })
 */
export function fingerprint(operation: string, effect: unknown): string {
  return sha256(`${operation}\n${canonicalJson(effect)}`, 'hex');
}
