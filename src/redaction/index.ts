/**
 * Redaction: what an audit event, a ledger error or a log line may keep of a payload.
 *
 * Two lines of defence. Field classes decide by key name or path (`secret` → dropped,
 * `credential_ref` → opaque ref, `identifier` → HMAC ref, `pii` → masked, `content` →
 * `{ bytes, hash, type }`); value scanners then look at every remaining string (private keys,
 * JWTs, API tokens, authorization values, `password=…`, e-mail addresses, cards, IBANs, phones).
 * Every result carries a receipt: rule ids, paths and counts, never values.
 */

export { type CustomScannerInput, SCANNER_IDS, type ScannerId } from '../scanners/index.js';
export type { ContentSummary } from './content-summary.js';
export { DEFAULT_ALLOWED_FIELDS, DEFAULT_FIELD_RULES } from './default-fields.js';
export {
  DEFAULT_POLICY_VERSION,
  DEFAULT_REDACTION_POLICY,
  defineRedactionPolicy,
  type RedactionPolicy,
} from './define-policy.js';
export type { RedactErrorOptions, RedactedError } from './error-shape.js';
export { FIELD_CLASSES, type FieldClass, type FieldVerdict } from './field-class.js';
export { normalizeName } from './normalize-name.js';
export { isMasked, maskPii } from './pii-mask.js';
export type { RedactionLimits } from './policy-engine.js';
export { OMITTED_KEY, type RedactionPolicyInput, redactionPolicySchema } from './policy-schema.js';
export { mergeReceipts, type RedactionReceipt } from './receipt.js';
export { type RedactionResult, type RedactOptions, redact } from './redact.js';
export { type OmittedSummary, redactDetails } from './redact-details.js';
export { redactError } from './redact-error.js';
export { redactString } from './redact-string.js';
export { identifierRef, verifyRef } from './refs.js';
