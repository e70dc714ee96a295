import { identifierAsStored } from '../audit/stored-identifier.js';
import type { RedactionPolicy } from '../redaction/define-policy.js';

/**
 * An actor as the audit trail tells it (the `actorId` grammar of `auditRedactor`): in clear when
 * it matches an identifier format of the policy (`alice`, `ops:bob`, a declared one), a reference of the policy's keyring kept as it is,
 * anything else (an e-mail address, a name with spaces) as the keyed reference `hmac:<kid>:…`. So
 * `answered_by`, the endpoint and `confirmations list` show what the trail shows, and an auditor
 * with the key finds a person's answers with `verifyRef`.
 *
 * @example actorIdAsTold('alice@example.com', policy) // 'hmac:k2:…', the event's actorId
 */
export function actorIdAsTold(actor: string, policy: RedactionPolicy): string {
  return identifierAsStored('actorId', actor, policy);
}

/** The shape of a keyed reference `identifierRef` writes: `hmac:<key id>:<43 base64url>`. */
const REF_SHAPE = /^hmac:[A-Za-z0-9._-]{1,32}:[A-Za-z0-9_-]{43}$/;

/**
 * A stored actor as it is shown: what {@link actorIdAsTold} stored is shown as it is, even a
 * reference made under another key (a process without `BQI_KEYRING` keys its references with a
 * key of its own, which no other process holds); an actor stored in clear before actors were
 * stored so is shown as the trail tells it.
 */
export function storedActorAsShown(stored: string, policy: RedactionPolicy): string {
  return REF_SHAPE.test(stored) ? stored : actorIdAsTold(stored, policy);
}
