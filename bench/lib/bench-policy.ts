import { readFileSync } from 'node:fs';
import { keyedAuditPolicy } from '../../src/config/audit-policy.js';
import type { RedactionPolicy } from '../../src/redaction/define-policy.js';
import type { Keyring } from '../../src/sealing/keyring.js';

/**
 * `bench:audit`'s redaction rules: the file its writer process is given as `BQI_REDACTION`, as a
 * deployment gives the operations process its workers' rules (docs/audit.md).
 */
export const BENCH_REDACTION_FILE = new URL('./bench-redaction.json', import.meta.url);

/** `bench:audit`'s redaction policy: its rules keyed from `keyring`, as every process keys them. */
export function benchPolicy(keyring: Keyring): RedactionPolicy {
  return keyedAuditPolicy(keyring, JSON.parse(readFileSync(BENCH_REDACTION_FILE, 'utf8')), 'bench');
}
