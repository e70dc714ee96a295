import type { RedactionPolicy } from '../redaction/define-policy.js';
import { DEFAULT_POLICY_VERSION, DEFAULT_REDACTION_POLICY, defineRedactionPolicy } from '../redaction/define-policy.js';
import type { Keyring } from '../sealing/keyring.js';

/**
 * The policy the operations process and the CLI hold audit events to: the built-in rules, with
 * the keyring's ref keys so the references they make match the workers' (whose policy takes
 * `hmacKeys: keyring.refKeys()`). Without a keyring, the built-in policy's per-process key.
 */
export function auditPolicyFor(keyring: Keyring | undefined): RedactionPolicy {
  if (!keyring) return DEFAULT_REDACTION_POLICY;
  return defineRedactionPolicy({ version: DEFAULT_POLICY_VERSION, hmacKeys: keyring.refKeys() });
}
