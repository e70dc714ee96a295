import { maskEmail } from '../scanners/index.js';

/**
 * The shapes a mask produces, so that masking a masked value changes nothing (redaction is
 * idempotent): `***`, `J***`, `j***@example.com`, `…4242`, and the scanners' `[card …4242]`.
 */
const MASKED =
  /^(?:\*\*\*|[^\s*]\*\*\*|[^\s@*]?\*\*\*@[^\s@]{1,253}|…[A-Z0-9]{4}|\[(?:card|phone) …[0-9]{4}\]|\[iban [A-Z]{2}…[A-Z0-9]{4}\])$/u;
const EMAIL = /^([^\s@]{1,64})@([^\s@]{1,253}\.[A-Za-z]{2,24})$/;
const NUMBER_LIKE = /^[+0-9 ().\-/]+$/;
const DATE_LIKE = /^[0-9]{1,4}[-/.][0-9]{1,2}[-/.][0-9]{1,4}/;
const IBAN_LIKE = /^[A-Z]{2}[0-9]{2}[A-Z0-9 ]{11,40}$/;

/** True when `value` already is one of the masked forms. */
export function isMasked(value: string): boolean {
  return value.length <= 300 && MASKED.test(value);
}

/**
 * A masked fragment of a personal value, chosen by its shape:
 * e-mail `j***@example.com`; card `…4242`; phone, account and other long numbers `…1234`;
 * dates and short values `***`; anything else its first character and `***` (`J***`).
 *
 * @example maskPii('Jane Doe') // 'J***'
 */
export function maskPii(value: string): string {
  if (isMasked(value)) return value;
  const text = value.trim();
  const email = EMAIL.exec(text);
  if (email) return maskEmail(email[1]!, email[2]!);
  if (DATE_LIKE.test(text)) return '***';
  const digits = text.replace(/[^0-9]/g, '');
  if (NUMBER_LIKE.test(text) && digits.length >= 7) {
    return `…${digits.slice(-4)}`;
  }
  if (IBAN_LIKE.test(text)) return `…${text.replaceAll(' ', '').slice(-4)}`;
  const first = text.codePointAt(0);
  if (first === undefined || (text.length <= 4 && [...text].length <= 2)) return '***';
  return `${String.fromCodePoint(first)}***`;
}
