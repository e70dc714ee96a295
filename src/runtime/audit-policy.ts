import { auditPolicyFor } from '../config/audit-policy.js';
import { IdempotencyConfigError } from '../errors/errors.js';
import {
  DEFAULT_POLICY_VERSION,
  defineRedactionPolicy,
  type RedactionPolicy,
  withValueScanner,
} from '../redaction/define-policy.js';
import type { RedactionPolicyInput } from '../redaction/policy-schema.js';
import { identifierRef } from '../redaction/refs.js';
import type { ValueScanner } from '../scanners/index.js';
import type { Keyring } from '../sealing/keyring.js';

/** A value no real identifier is: the probe two policies' references are compared on. */
const PROBE = 'bullmq-idempotency runtime probe';

/**
 * The runtime's audit policy, keyed from its keyring: the built-in one the CLI and the operations
 * process use (`auditPolicyFor`), the user's rules with the keyring's ref keys, or a compiled
 * policy that must make the same references as the keyring's keys. A policy keyed otherwise
 * would make the workers' references differ from the writer's and the operators', and a
 * `timeline(taskId)` of a task id stored as a reference would find nothing, without an error.
 * With `valueScanner`, the policy scans with it in place of its built-in scanners.
 */
export function runtimeAuditPolicy(
  keyring: Keyring,
  redaction: RedactionPolicy | Omit<RedactionPolicyInput, 'hmacKeys'> | undefined,
  valueScanner?: ValueScanner,
): RedactionPolicy {
  const policy = keyedPolicy(keyring, redaction);
  return valueScanner === undefined ? policy : withValueScanner(policy, valueScanner);
}

function keyedPolicy(
  keyring: Keyring,
  redaction: RedactionPolicy | Omit<RedactionPolicyInput, 'hmacKeys'> | undefined,
): RedactionPolicy {
  const keyed = auditPolicyFor(keyring);
  if (redaction === undefined) return keyed;
  if (!isCompiled(redaction)) {
    if ('hmacKeys' in redaction) {
      throw new IdempotencyConfigError(
        'audit.redaction: leave hmacKeys out, the runtime keys the policy from its keyring (keyring.refKeys())',
        { option: 'audit.redaction' },
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
      `audit.redaction is keyed with ${JSON.stringify(redaction.currentKeyId)}, not with the keyring's ` +
        `current key ${JSON.stringify(keyring.currentId)}: its references would join nothing the workers, the writer ` +
        'and operators make. Build it with hmacKeys: keyring.refKeys(), or pass its input without hmacKeys',
      { option: 'audit.redaction', policyKeyId: redaction.currentKeyId, keyringKeyId: keyring.currentId },
    );
  }
  return redaction;
}

function isCompiled(p: RedactionPolicy | Omit<RedactionPolicyInput, 'hmacKeys'>): p is RedactionPolicy {
  return typeof (p as Partial<RedactionPolicy>).currentKeyId === 'string';
}
