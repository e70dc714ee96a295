import { type AuditRedaction, keyedAuditPolicy } from '../config/audit-policy.js';
import { type RedactionPolicy, withValueScanner } from '../redaction/define-policy.js';
import type { ValueScanner } from '../scanners/index.js';
import type { Keyring } from '../sealing/keyring.js';

/**
 * The runtime's audit policy, keyed from its keyring (`keyedAuditPolicy`, option
 * `audit.redaction`): the built-in one the CLI and the operations process use by default, the
 * user's rules with the keyring's ref keys, or a compiled policy that must make the same
 * references as the keyring's keys. With `valueScanner`, the policy scans with it in place of its
 * built-in scanners.
 */
export function runtimeAuditPolicy(
  keyring: Keyring,
  redaction: AuditRedaction | undefined,
  valueScanner?: ValueScanner,
): RedactionPolicy {
  const policy = keyedAuditPolicy(keyring, redaction, 'audit.redaction');
  return valueScanner === undefined ? policy : withValueScanner(policy, valueScanner);
}
