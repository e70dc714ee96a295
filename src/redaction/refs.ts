import type { RedactionPolicy } from './define-policy.js';
import { engineOf } from './policy-engine.js';

/**
 * The reference the policy's current key gives an identifier, as `redact` writes it for an
 * `identifier` field: to find the audit events of a user without storing the user id.
 *
 * @example identifierRef('user_123', policy) // 'hmac:k2:3q2+7w…'
 */
export function identifierRef(value: string, policy: RedactionPolicy): string {
  return engineOf(policy).keyring.identifierRef(value);
}

/**
 * True when `ref` (an identifier's `hmac:` or a credential's `ref:` reference) was made from
 * `value` by any key of the policy, the current one or one rotated out.
 */
export function verifyRef(ref: string, value: string, policy: RedactionPolicy): boolean {
  const { keyring } = engineOf(policy);
  return keyring.verify(ref, value, ref.startsWith('ref:') ? 'credential_ref' : 'identifier');
}
