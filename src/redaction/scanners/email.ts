import { replaceMatches } from './replace-matches.js';
import type { Scanner } from './scanner.js';
import { F_AT, F_DOT } from './text-features.js';

/**
 * A local part, `@`, and dot-separated domain labels. The look-behind starts a match only at the
 * beginning of a local-part run (not after `@` or `*`, so a masked address is never matched
 * again); the labels are bounded and separated by dots, so nothing backtracks far.
 */
const EMAIL = /(?<![A-Za-z0-9._%+\-@*])[A-Za-z0-9._%+-]+@[A-Za-z0-9-]{1,63}(?:\.[A-Za-z0-9-]{1,63}){1,8}/g;
const TLD = /^[A-Za-z]{2,24}$/;

/** `jane.doe@example.com` → `j***@example.com`: the domain stays readable, the person does not. */
export function maskEmail(local: string, domain: string): string {
  return `${local.charAt(0)}***@${domain}`;
}

/** E-mail addresses, masked (not removed) so that an auditor still sees which domain was involved. */
export const emailScanner: Scanner = {
  id: 'email',
  allOf: F_AT | F_DOT,
  anyOf: 0,
  minLength: 6,
  minDigits: 0,
  minRun: 0,
  scan(text, sink) {
    return replaceMatches(EMAIL, text, ([m]) => {
      const at = m.indexOf('@');
      const domain = m.slice(at + 1);
      // `react@18.2.0` and `user@host` are not addresses: the last label must be a word.
      if (!TLD.test(domain.slice(domain.lastIndexOf('.') + 1))) return m;
      sink.hit('email');
      return maskEmail(m.slice(0, at), domain);
    });
  },
};
