import { unconfuse } from './confusables.js';

const ALNUM = /^[a-z0-9]*$/;
const NOT_ASCII = /[\u0080-\uffff]/;
const NOT_ASCII_ALNUM = /[^a-z0-9]/g;
const NOT_ALNUM = /[^\p{L}\p{N}]/gu;
const MARKS = /\p{M}/gu;
const NON_ASCII = /[\u0080-\uffff]/g;

/**
 * A name's letters as they look, not as they are encoded: compatibility forms folded (NFKD:
 * full-width `ｐａｓｓ` is `pass`, `ﬁ` is `fi`), accents dropped (`contraseña`), Cyrillic and
 * Greek look-alikes mapped to Latin (`pаssword` with a Cyrillic `а`). Case and separators stay.
 */
export function foldName(name: string): string {
  return name.normalize('NFKD').replace(MARKS, '').replace(NON_ASCII, unconfuse);
}

/**
 * The form in which field names are compared: folded ({@link foldName}), lower case, letters
 * and digits only, so that `apiKey`, `api_key`, `API-KEY`, `x.api key` and `ＡＰＩ＿ＫＥＹ` all meet
 * as `apikey` / `xapikey`.
 *
 * @example normalizeName('API-KEY') // 'apikey'
 */
export function normalizeName(name: string): string {
  const lower = name.toLowerCase();
  // Most keys are already plain ASCII words; skip the Unicode-aware work for them.
  if (ALNUM.test(lower)) return lower;
  if (!NOT_ASCII.test(lower)) return lower.replace(NOT_ASCII_ALNUM, '');
  return foldName(name).toLowerCase().replace(NOT_ALNUM, '');
}
