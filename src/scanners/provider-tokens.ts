import { replaceMatches } from './replace-matches.js';
import { marker, type Scanner } from './scanner.js';
import { F_DASH, F_UPPER } from './text-features.js';

/**
 * Known token prefixes followed by a run of token characters. Nothing follows the run in the
 * pattern, so a match never backtracks into it; the look-behind keeps `task-sk-…` from matching
 * inside a word. Which provider it is, and whether the body is plausible, is decided in code.
 */
const TOKEN =
  /(?<![A-Za-z0-9])(?:gh[pousr]_|github_pat_|glpat-|xox[abposr]-|[rs]k_(?:live|test)_|whsec_|sk-|AKIA|ASIA|AIza|npm_)[A-Za-z0-9_-]{10,}/g;

const ALNUM = /^[A-Za-z0-9]+$/;
const AWS_ID_BODY = /^[A-Z0-9]{16}$/;

/** Random base62 has upper, lower and digits; `sk-learn-model` has not. */
function looksRandom(body: string): boolean {
  return /[A-Z]/.test(body) && /[a-z]/.test(body) && /[0-9]/.test(body);
}

/** Rule id for a candidate, or undefined when it is not a credential of that provider. */
function classify(m: string): string | undefined {
  if (m.startsWith('github_pat_')) return m.length >= 11 + 40 ? 'github_token' : undefined;
  if (m.startsWith('gh')) return m.length >= 4 + 30 && ALNUM.test(m.slice(4)) ? 'github_token' : undefined;
  if (m.startsWith('glpat-')) return m.length >= 6 + 20 ? 'gitlab_token' : undefined;
  if (m.startsWith('xox')) return m.length >= 15 && /[0-9]/.test(m) ? 'slack_token' : undefined;
  if (m.startsWith('whsec_')) return m.length >= 6 + 24 ? 'stripe_key' : undefined;
  if (m.startsWith('sk_') || m.startsWith('rk_')) return m.length >= 8 + 16 ? 'stripe_key' : undefined;
  if (m.startsWith('sk-ant-')) return m.length >= 7 + 20 ? 'anthropic_key' : undefined;
  if (m.startsWith('sk-')) {
    const body = m.slice(3);
    const named = /^(?:proj|svcacct|admin)-/.test(body);
    return (named ? body.length >= 24 : body.length >= 32) && looksRandom(body) ? 'openai_key' : undefined;
  }
  if (m.startsWith('AKIA') || m.startsWith('ASIA')) {
    // Access key ids are exactly 20 characters; a longer run is some other identifier.
    return AWS_ID_BODY.test(m.slice(4)) ? 'aws_access_key_id' : undefined;
  }
  if (m.startsWith('AIza')) return m.length === 39 ? 'google_api_key' : undefined;
  if (m.startsWith('npm_')) return m.length === 40 && ALNUM.test(m.slice(4)) ? 'npm_token' : undefined;
  return undefined;
}

/**
 * True when `text` holds a token the scanner below would recognise (`glpat-…`, `sk_live_…`,
 * `AKIA…`): the identifier grammar never tells such a value in clear, whatever its body looks like.
 */
export function holdsProviderToken(text: string): boolean {
  for (const [m] of text.matchAll(TOKEN)) if (classify(m)) return true;
  return false;
}

/**
 * API tokens with a recognisable format: GitHub (`ghp_`, `gho_`, `ghs_`, `ghu_`, `ghr_`,
 * `github_pat_`), GitLab (`glpat-`), Slack (`xox[abprs]-`), Stripe (`sk_live_`, `sk_test_`,
 * `rk_live_`, `whsec_`), OpenAI (`sk-`, `sk-proj-`), Anthropic (`sk-ant-`), AWS access key ids
 * (`AKIA`, `ASIA`), Google API keys (`AIza`) and npm tokens (`npm_`).
 */
export const providerTokenScanner: Scanner = {
  id: 'provider_token',
  allOf: 0,
  anyOf: F_DASH | F_UPPER,
  minLength: 14,
  minDigits: 0,
  minRun: 0,
  minAlnum: 0,
  scan(text, sink) {
    return replaceMatches(TOKEN, text, ([m]) => {
      const rule = classify(m);
      if (!rule) return m;
      sink.hit(rule);
      return marker(rule);
    });
  },
};
