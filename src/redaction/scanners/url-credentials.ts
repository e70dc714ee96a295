import { replaceMatches } from './replace-matches.js';
import { marker, type Scanner } from './scanner.js';
import { F_ASSIGN } from './text-features.js';

/**
 * `scheme://user:password@host`: the password goes, the user stays. Starts only right after
 * `://`, and both parts are bounded, so each start costs a bounded number of steps.
 */
const URL_CREDENTIALS = /(?<=:\/\/)([^\s:@/?#[\]]{1,256}):([^\s@/?#]{1,256})@/g;

/** Passwords in connection strings and URLs (`postgres://app:hunter2@db/prod`). */
export const urlCredentialsScanner: Scanner = {
  id: 'url_credentials',
  allOf: F_ASSIGN,
  anyOf: 0,
  minLength: 10,
  minDigits: 0,
  minRun: 0,
  mayMatch: (text) => text.includes('://'),
  scan(text, sink) {
    return replaceMatches(URL_CREDENTIALS, text, ([m, user = '', password = '']) => {
      if (password.startsWith('[redacted:')) return m;
      sink.hit('url_credentials');
      return `${user}:${marker('url_credentials')}@`;
    });
  },
};
