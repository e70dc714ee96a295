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
  'phone',
] as const;

export type ScannerId = (typeof SCANNER_IDS)[number];

/** Receives one call per replaced match, with the rule id (without the `scan.` prefix). */
export type HitSink = { hit(rule: string): void };

/**
 * A value scanner: a cheap pre-check on the text's features, then a linear-time replacement.
 *
 * Every pattern is written so that each start position costs a bounded number of steps or only
 * starts at the beginning of a run (a look-behind), which keeps a scan linear in the text length:
 * no nested quantifiers over overlapping classes, no unbounded run followed by a required token
 * that the run could also match.
 */
export type Scanner = {
  readonly id: ScannerId;
  /** False when the scanner cannot match a text with these features (see `textFeatures`). */
  applies(text: string, features: number): boolean;
  /** The text with every match replaced by its marker; the same string when nothing matched. */
  scan(text: string, sink: HitSink): string;
};

/** The typed marker that replaces a secret: `[redacted:jwt]`. */
export function marker(rule: string): string {
  return `[redacted:${rule}]`;
}
