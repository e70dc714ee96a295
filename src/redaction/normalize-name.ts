const ALNUM = /^[a-z0-9]*$/;
const NOT_ALNUM = /[^\p{L}\p{N}]/gu;

/**
 * The form in which field names are compared: lower case, letters and digits only, so that
 * `apiKey`, `api_key`, `API-KEY` and `x.api key` all meet as `apikey` / `xapikey`.
 *
 * @example normalizeName('API-KEY') // 'apikey'
 */
export function normalizeName(name: string): string {
  const lower = name.toLowerCase();
  // Most keys are already plain ASCII words; skip the Unicode-aware replace for them.
  return ALNUM.test(lower) ? lower : lower.replace(NOT_ALNUM, '');
}
