import { marker, type Scanner } from './scanner.js';
import { F_DASH } from './text-features.js';

const BEGIN = '-----BEGIN ';
const DASHES = '-----';
/** Longest label we accept between BEGIN and the closing dashes ("ENCRYPTED PRIVATE KEY", "PGP PRIVATE KEY BLOCK"). */
const MAX_LABEL = 64;

/**
 * PEM private keys (PKCS#1, PKCS#8, SEC1, OpenSSH, PGP), written with indexOf rather than a
 * regex: each BEGIN is looked at once, so the scan is linear. A key without its END line is
 * redacted to the end of the text (fail closed: a truncated key is still a key).
 */
export const privateKeyScanner: Scanner = {
  id: 'private_key',
  allOf: F_DASH,
  anyOf: 0,
  minLength: 40,
  minDigits: 0,
  minRun: 0,
  minAlnum: 0,
  mayMatch: (text) => text.includes('-----BEGIN'),
  scan(text, sink) {
    let i = text.indexOf(BEGIN);
    let out = '';
    let last = 0;
    while (i >= 0) {
      const labelStart = i + BEGIN.length;
      const labelEnd = text.indexOf(DASHES, labelStart);
      if (labelEnd < 0) break;
      const label = text.slice(labelStart, labelEnd);
      if (labelEnd - labelStart > MAX_LABEL || !label.includes('PRIVATE KEY')) {
        i = text.indexOf(BEGIN, labelStart);
        continue;
      }
      const endLine = `-----END ${label}-----`;
      const j = text.indexOf(endLine, labelEnd + DASHES.length);
      const stop = j < 0 ? text.length : j + endLine.length;
      out += text.slice(last, i) + marker('private_key');
      sink.hit('private_key');
      last = stop;
      i = text.indexOf(BEGIN, stop);
    }
    return last === 0 ? text : out + text.slice(last);
  },
};
