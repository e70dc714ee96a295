/**
 * What a field holds, which decides how its value is redacted:
 *
 * - `secret`: a password, token, key or cookie. The field is removed; the receipt names its path.
 * - `credential_ref`: a pointer to a credential (vault path, secret ARN). Replaced by an opaque,
 *   stable, truncated HMAC reference (`ref:<keyId>:<22 chars>`).
 * - `identifier`: a user, customer or account id. Replaced by an HMAC-SHA-256 reference
 *   (`hmac:<keyId>:<43 chars>`), so events about the same person still join up.
 * - `pii`: personal data (e-mail, phone, name, address, card...). Replaced by a masked fragment.
 * - `content`: prompts, conversations, uploads, bodies. Replaced by `{ bytes, hash, type }`.
 */
export const FIELD_CLASSES = ['secret', 'credential_ref', 'identifier', 'pii', 'content'] as const;

export type FieldClass = (typeof FIELD_CLASSES)[number];

/** A field that an `allow` rule exempts from every field class (value scanners still run). */
export type FieldVerdict = FieldClass | 'allow';
