import { NO_HITS, scanBounded } from './bounded-scan.js';
import type { RedactionPolicy } from './define-policy.js';
import { engineOf } from './policy-engine.js';

/**
 * Scrubs a free text (an error message, a stack trace, a log line) with the policy's value
 * scanners. Texts longer than `limits.maxStringLength` are cut (at whitespace) and marked
 * `…[truncated N chars]`.
 *
 * @example redactString('login failed for jane@example.com with Bearer eyJ…', policy)
 * // 'login failed for j***@example.com with Bearer [redacted:jwt]'
 */
export function redactString(text: string, policy: RedactionPolicy): string {
  return scanBounded(engineOf(policy), text, NO_HITS);
}
