/**
 * Scanner ids, as a policy names them in `disabledScanners`. One scanner may report several rule
 * ids (`provider_token` reports `scan.github_token`, `scan.stripe_key`...).
 */
export const SCANNER_IDS = [
  'private_key',
  'jwt',
  'provider_token',
  'url_credentials',
  'auth_header',
  'secret_pair',
  'email',
  'card',
  'iban',
  'national_id',
  'phone',
  'high_entropy',
] as const;

export type ScannerId = (typeof SCANNER_IDS)[number];

/** Receives one call per replaced match, with the rule id (without the `scan.` prefix). */
export type HitSink = { hit(rule: string): void };

/**
 * A value scanner: pre-conditions on the text's features (checked as plain numbers, so a clean
 * text costs a few integer comparisons per scanner), then a linear-time replacement.
 *
 * Every pattern is written so that each start position costs a bounded number of steps or only
 * starts at the beginning of a run (a look-behind), which keeps a scan linear in the text length:
 * no nested quantifiers over overlapping classes, no unbounded run followed by a required token
 * that the run could also match.
 */
export type Scanner = {
  /** A built-in {@link ScannerId}, or the id of a policy's own scanner. */
  readonly id: string;
  /** Feature flags (see `textFeatures`) that must all be present for a match to be possible. */
  readonly allOf: number;
  /** Feature flags of which at least one must be present (0: no such condition). */
  readonly anyOf: number;
  readonly minLength: number;
  readonly minDigits: number;
  /** Longest run of digits (single separators allowed between them) a match needs. */
  readonly minRun: number;
  /** Longest run of ASCII letters and digits a match needs. */
  readonly minAlnum: number;
  /** A further test on the packed features (integer comparisons), run when the fields above pass. */
  readonly gate?: (features: number) => boolean;
  /** A last cheap test (a substring search), run only when the flag checks pass. */
  readonly mayMatch?: (text: string) => boolean;
  /** The text with every match replaced by its marker; the same string when nothing matched. */
  scan(text: string, sink: HitSink, features: number): string;
};

/** The typed marker that replaces a secret: `[redacted:jwt]`. */
export function marker(rule: string): string {
  return `[redacted:${rule}]`;
}
