import { foldName } from '../scanners/index.js';

const ALNUM = /^[a-z0-9]*$/;
const NOT_ASCII = /[\u0080-\uffff]/;
const NOT_ASCII_ALNUM = /[^a-z0-9]/g;
const NOT_ALNUM = /[^\p{L}\p{N}]/gu;

/**
 * The form in which field names are compared: folded (`foldName`), lower case, letters
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
