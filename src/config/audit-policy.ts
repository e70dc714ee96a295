import { IdempotencyConfigError } from '../errors/errors.js';
import type { RedactionPolicy } from '../redaction/define-policy.js';
import { DEFAULT_POLICY_VERSION, DEFAULT_REDACTION_POLICY, defineRedactionPolicy } from '../redaction/define-policy.js';
import type { RedactionPolicyInput } from '../redaction/policy-schema.js';
import { identifierRef } from '../redaction/refs.js';
import type { Keyring } from '../sealing/keyring.js';

/**
 * The trail's own redaction rules, as the runtime's `audit.redaction`, the operations process's
 * `redaction` and a `BQI_REDACTION` module give them: the policy's input without `hmacKeys` (the
 * keyring's ref keys are added), or a compiled policy keyed from the same keyring.
 */
export type AuditRedaction = RedactionPolicy | Omit<RedactionPolicyInput, 'hmacKeys'>;

/**
 * The policy the operations process and the CLI hold audit events to: the built-in rules, with
 * the keyring's ref keys so the references they make match the workers' (whose policy takes
 * `hmacKeys: keyring.refKeys()`). Without a keyring, the built-in policy's per-process key.
 */
export function auditPolicyFor(keyring: Keyring | undefined): RedactionPolicy {
  if (!keyring) return DEFAULT_REDACTION_POLICY;
  return defineRedactionPolicy({ version: DEFAULT_POLICY_VERSION, hmacKeys: keyring.refKeys() });
}

/** A value no real identifier is: the probe two policies' references are compared on. */
const PROBE = 'bullmq-idempotency runtime probe';

/**
 * The trail's policy keyed from `keyring`: the built-in one ({@link auditPolicyFor}) when
 * `redaction` is undefined, the application's rules with the keyring's ref keys, or a compiled
 * policy that must make the same references as the keyring's keys. A policy keyed otherwise would
 * make one process's references differ from the others', and a `timeline(taskId)` of a task id
 * stored as a reference would find nothing, without an error. `option` names where the rules
 * came from in the error (`IDEMPOTENCY_CONFIG`).
 */
export function keyedAuditPolicy(
  keyring: Keyring,
  redaction: AuditRedaction | undefined,
  option: string,
): RedactionPolicy {
  const keyed = auditPolicyFor(keyring);
  if (redaction === undefined) return keyed;
  if (!isCompiled(redaction)) {
    if ('hmacKeys' in redaction) {
      throw new IdempotencyConfigError(
        `${option}: leave hmacKeys out, the policy is keyed from the keyring (keyring.refKeys())`,
        { option },
      );
    }
    return defineRedactionPolicy({
      ...redaction,
      version: redaction.version ?? DEFAULT_POLICY_VERSION,
      hmacKeys: keyring.refKeys(),
    });
  }
  if (identifierRef(PROBE, redaction) !== identifierRef(PROBE, keyed)) {
    throw new IdempotencyConfigError(
      `${option} is keyed with ${JSON.stringify(redaction.currentKeyId)}, not with the keyring's ` +
        `current key ${JSON.stringify(keyring.currentId)}: its references would join nothing the workers, the writer ` +
        'and operators make. Build it with hmacKeys: keyring.refKeys(), or pass its input without hmacKeys',
      { option, policyKeyId: redaction.currentKeyId, keyringKeyId: keyring.currentId },
    );
  }
  return redaction;
}

function isCompiled(p: AuditRedaction): p is RedactionPolicy {
  return typeof (p as Partial<RedactionPolicy>).currentKeyId === 'string';
}
