import { replaceMatches } from './replace-matches.js';
import type { Scanner } from './scanner.js';
import { F_AT, F_DOT, F_NONASCII } from './text-features.js';

/**
 * A local part, `@`, and dot-separated domain labels. The look-behind starts a match only at the
 * beginning of a local-part run (not after `@` or `*`, so a masked address is never matched
 * again); the labels are bounded and separated by dots, so nothing backtracks far.
 */
const EMAIL = /(?<![A-Za-z0-9._%+\-@*])[A-Za-z0-9._%+-]+@[A-Za-z0-9-]{1,63}(?:\.[A-Za-z0-9-]{1,63}){1,8}/g;
const TLD = /^[A-Za-z]{2,24}$/;
/**
 * The same with letters and digits of any script (`jürgen@müller.de`, `用户@例子.公司`), and the
 * ideographic full stop as a label separator. Used only for texts that hold non-ASCII characters.
 */
const EMAIL_UNICODE =
  /(?<![\p{L}\p{N}\p{M}._%+\-@*])[\p{L}\p{N}\p{M}._%+-]+@[\p{L}\p{N}\p{M}-]{1,63}(?:[.。．｡][\p{L}\p{N}\p{M}-]{1,63}){1,8}/gu;
const TLD_UNICODE = /^(?:[A-Za-z]{2,24}|[\p{L}\p{M}]{2,24}|xn--[a-z0-9-]{1,59})$/u;
const LABEL_DOT = /[.。．｡]/g;

/** `jane.doe@example.com` → `j***@example.com`: the domain stays readable, the person does not. */
export function maskEmail(local: string, domain: string): string {
  const first = local.codePointAt(0);
  return `${first === undefined ? '' : String.fromCodePoint(first)}***@${domain}`;
}

function lastLabel(domain: string): string {
  let at = -1;
  for (const m of domain.matchAll(LABEL_DOT)) at = m.index;
  return domain.slice(at + 1);
}

/** E-mail addresses, masked (not removed) so that an auditor still sees which domain was involved. */
export const emailScanner: Scanner = {
  id: 'email',
  allOf: F_AT,
  anyOf: 0,
  minLength: 5,
  minDigits: 0,
  minRun: 0,
  minAlnum: 0,
  scan(text, sink, features) {
    const unicode = (features & F_NONASCII) !== 0;
    if (!unicode && (features & F_DOT) === 0) return text;
    return replaceMatches(unicode ? EMAIL_UNICODE : EMAIL, text, ([m]) => {
      const at = m.indexOf('@');
      const domain = m.slice(at + 1);
      // `react@18.2.0` and `user@host` are not addresses: the last label must be a word.
      if (!(unicode ? TLD_UNICODE : TLD).test(lastLabel(domain))) return m;
      sink.hit('email');
      return maskEmail(m.slice(0, at), domain);
    });
  },
};
