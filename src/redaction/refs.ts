import type { RedactionPolicy } from './define-policy.js';
import { engineOf } from './policy-engine.js';

/**
 * The reference the policy's current key gives an identifier, as `redact` writes it for an
 * `identifier` field and `auditRedactor` for an event field that fails its grammar: to find the
 * audit events of a user without storing the user id. `hmac:<keyId>:` and 43 base64url
 * characters: 32 of the HMAC, then 11 of a keyed check of those, so that only references the
 * policy made are trusted as references.
 *
 * @example identifierRef('user_123', policy) // 'hmac:k2:3q2x7wQ…' (51 characters with a 2-character key id)
 */
export function identifierRef(value: string, policy: RedactionPolicy): string {
  return engineOf(policy).keyring.identifierRef(value);
}

/**
 * True when `ref` (an identifier's `hmac:` or a credential's `ref:` reference) was made from
 * `value` by any key of the policy, the current one or one rotated out.
 *
 * @example verifyRef(event.actorId, 'jane@example.com', policy) // true when the event is about her
 */
export function verifyRef(ref: string, value: string, policy: RedactionPolicy): boolean {
  const { keyring } = engineOf(policy);
  return keyring.verify(ref, value, ref.startsWith('ref:') ? 'credential_ref' : 'identifier');
}
