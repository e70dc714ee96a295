import { DEFAULT_REDACTION_POLICY } from './define-policy.js';
import { redactString } from './redact-string.js';

/** Longest free-text reason kept (an operator's, a confirmation's): short, scanned, bounded. */
export const MAX_REASON_LENGTH = 500;

// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what is removed
const CONTROL = /[\u0000-\u001f\u007f-\u009f]+/g;

/**
 * Free text a person reads or wrote, as it may be kept (audit trail, confirmation requests): one
 * line, control characters removed, value scanners of the default redaction policy applied
 * (e-mail addresses, tokens, card numbers...), at most {@link MAX_REASON_LENGTH} characters.
 */
export function cleanReason(text: string): string {
  const oneLine = text.replace(CONTROL, ' ').replace(/\s+/g, ' ').trim();
  const scrubbed = redactString(oneLine, DEFAULT_REDACTION_POLICY);
  return scrubbed.length <= MAX_REASON_LENGTH ? scrubbed : `${scrubbed.slice(0, MAX_REASON_LENGTH - 1)}…`;
}
