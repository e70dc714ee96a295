import { timingSafeEqual } from 'node:crypto';
import type { RedactionPolicy } from '../redaction/define-policy.js';
import { engineOf, type PolicyEngine } from '../redaction/policy-engine.js';

/**
 * An audit batch's tag: `<keyId>.<base64url HMAC-SHA-256>` under the policy's current key, of the
 * policy's fingerprint (policy-fingerprint.ts), the batch's event count and its payload as sent.
 *
 * The writer holds every event to the policy again before Postgres, whoever made it
 * (`storeRedactor`): that costs about a fifth of its CPU, and for an emitter's batch it changes
 * nothing (the emitter's redaction is a fixed point of the writer's). An emitter that redacts with
 * the library's own `auditRedactor` tags its batches; a writer whose policy has the same
 * fingerprint and key, and for which the tag holds, checks each event (`isAuditEvent`) and
 * stores it without redacting it again. A batch without a tag, with one that does not hold (a
 * changed payload, another policy or key, a batch made up in Redis), or whose events were made
 * by a custom `redact`, is redacted again, as before: the tag only ever saves work.
 *
 * Undefined when the policy has no fingerprint.
 */
export function batchTag(policy: RedactionPolicy, count: number, payload: string): string | undefined {
  const engine = engineOf(policy);
  if (engine.fingerprint === undefined) return undefined;
  const keyId = engine.keyring.currentId;
  return `${keyId}.${macOf(engine, keyId, count, payload)}`;
}

/** True when `tag` is the tag of this batch (`count` events, `payload`) under `policy`. */
export function batchTagHolds(policy: RedactionPolicy, tag: unknown, count: number, payload: string): boolean {
  if (typeof tag !== 'string') return false;
  const engine = engineOf(policy);
  if (engine.fingerprint === undefined) return false;
  const dot = tag.lastIndexOf('.');
  const keyId = tag.slice(0, dot);
  if (dot < 1 || !engine.keyring.ids.includes(keyId)) return false;
  const want = Buffer.from(macOf(engine, keyId, count, payload));
  const got = Buffer.from(tag.slice(dot + 1));
  return want.length === got.length && timingSafeEqual(want, got);
}

function macOf(engine: PolicyEngine, keyId: string, count: number, payload: string): string {
  return engine.keyring.digest('audit_batch', `${engine.fingerprint}\0${count}\0${payload}`, keyId);
}
