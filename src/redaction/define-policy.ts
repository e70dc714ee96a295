import { randomBytes } from 'node:crypto';
import { IdempotencyConfigError } from '../errors/errors.js';
import { policyScanner, type ValueScanner } from '../scanners/index.js';
import { DEFAULT_ALLOWED_FIELDS, DEFAULT_FIELD_RULES } from './default-fields.js';
import { FIELD_CLASSES, type FieldClass, type FieldVerdict } from './field-class.js';
import { parseFieldPattern, patternKey } from './field-pattern.js';
import { HmacKeyring } from './hmac-keyring.js';
import {
  attachIdentifierFormats,
  compileIdentifierFormats,
  type IdentifierFormats,
  identifierFormatsOf,
} from './identifier-formats.js';
import { type FieldRule, NameMatcher } from './name-matcher.js';
import { normalizeName } from './normalize-name.js';
import { attachEngine, engineOf, type RedactionLimits } from './policy-engine.js';
import { policyFingerprint } from './policy-fingerprint.js';
import { type RedactionPolicyInput, redactionPolicySchema } from './policy-schema.js';

/**
 * A compiled redaction policy: what it does, readable; how (matcher, HMAC keys, scanners) is
 * kept out of reach, so a policy can be logged without leaking its keys.
 */
export type RedactionPolicy = {
  readonly version: string;
  /** Id of the key that makes new references. */
  readonly currentKeyId: string;
  /** Every key id, current first. */
  readonly keyIds: readonly string[];
  /** Effective field rules per class (built-ins merged with the policy's own). */
  readonly fields: Readonly<Record<FieldClass, readonly string[]>>;
  /** Effective exemptions. */
  readonly allow: readonly string[];
  /** Allow-listed detail keys per action. */
  readonly details: Readonly<Record<string, readonly string[]>>;
  /** Event fields with identifier formats declared (see `identifiers` of the policy's input). */
  readonly identifierFields: readonly string[];
  /** Enabled scanners, in the order they run: the policy's own first, then the built-in ones. */
  readonly scanners: readonly string[];
  readonly limits: Readonly<RedactionLimits>;
};

/** Version of {@link DEFAULT_REDACTION_POLICY}. */
export const DEFAULT_POLICY_VERSION = 'builtin-1';

/**
 * Validates and compiles a redaction policy. Throws {@link IdempotencyConfigError}
 * (`IDEMPOTENCY_CONFIG`, `details.issues`) for a bad policy: a missing or short HMAC key, a
 * malformed field pattern, or one field listed under two classes.
 *
 * @example
 * const policy = defineRedactionPolicy({
 *   version: '2025-06',
 *   hmacKeys: [{ id: 'k1', secret: process.env.AUDIT_HMAC_KEY! }],
 *   fields: { identifier: ['tenantId'] },
 *   details: { 'payments.charge': ['amount', 'currency'] },
 * });
 */
export function defineRedactionPolicy(input: RedactionPolicyInput): RedactionPolicy {
  const parsed = redactionPolicySchema.safeParse(input);
  if (!parsed.success) {
    const issues = parsed.error.issues.map((i) => ({ path: i.path.map(String).join('.'), message: i.message }));
    throw invalid(issues);
  }
  const p = parsed.data;
  const own = ownRules(p.fields, p.allow);
  const merged = new Map<string, FieldRule>();
  if (p.includeDefaults) {
    for (const cls of FIELD_CLASSES) for (const pattern of DEFAULT_FIELD_RULES[cls]) add(merged, pattern, cls);
    for (const pattern of DEFAULT_ALLOWED_FIELDS) add(merged, pattern, 'allow');
  }
  for (const rule of own) add(merged, rule.pattern, rule.verdict);
  const rules = [...merged.values()];

  const scanning = policyScanner(p.scanners, p.disabledScanners);
  const details = new Map<string, ReadonlySet<string>>();
  for (const [action, keys] of Object.entries(p.details)) details.set(action, new Set(keys.map(normalizeName)));
  const keyring = new HmacKeyring(p.hmacKeys);

  const fields = Object.fromEntries(
    FIELD_CLASSES.map((cls) => [cls, Object.freeze(rules.filter((r) => r.verdict === cls).map((r) => r.pattern))]),
  ) as Record<FieldClass, readonly string[]>;
  const policy: RedactionPolicy = Object.freeze({
    version: p.version,
    currentKeyId: keyring.currentId,
    keyIds: Object.freeze([...keyring.ids]),
    fields: Object.freeze(fields),
    allow: Object.freeze(rules.filter((r) => r.verdict === 'allow').map((r) => r.pattern)),
    details: Object.freeze(Object.fromEntries(Object.entries(p.details).map(([a, k]) => [a, Object.freeze([...k])]))),
    identifierFields: Object.freeze(Object.keys(p.identifiers)),
    scanners: Object.freeze([...scanning.ids]),
    limits: Object.freeze({ ...p.limits }),
  });
  attachIdentifierFormats(policy, compileIdentifierFormats(p.identifiers as IdentifierFormats));
  attachEngine(policy, {
    version: p.version,
    matcher: new NameMatcher(rules),
    keyring,
    scanner: scanning.scanner,
    ownScanners: p.scanners,
    inferSecretNames: p.includeDefaults,
    details,
    limits: { ...p.limits },
    keys: new Map(),
    fingerprint: policyFingerprint(p),
  });
  return policy;
}

/**
 * The policy with `scanner` in place of its built-in value scanners (its own scanners still run
 * first): the same rules, keys, limits and identifier formats. Its `scanners` list ends with
 * `value_scanner`.
 */
export function withValueScanner(policy: RedactionPolicy, scanner: ValueScanner): RedactionPolicy {
  const engine = engineOf(policy);
  const scanning = policyScanner(engine.ownScanners, [], scanner);
  const replaced: RedactionPolicy = Object.freeze({ ...policy, scanners: Object.freeze([...scanning.ids]) });
  attachIdentifierFormats(replaced, identifierFormatsOf(policy));
  // A replaced scanner's code is not part of the definition: the policy has no fingerprint.
  attachEngine(replaced, { ...engine, scanner: scanning.scanner, keys: new Map(), fingerprint: undefined });
  return replaced;
}

function add(rules: Map<string, FieldRule>, pattern: string, verdict: FieldVerdict): void {
  // Keyed by the normalised spelling, so a policy's `api_key` replaces the built-in `apiKey`.
  rules.set(patternKey(parseFieldPattern(pattern)), { pattern, verdict });
}

/** The policy's own rules; refuses a field that it lists under two verdicts. */
function ownRules(fields: { [C in FieldClass]?: string[] | undefined }, allow: string[]): FieldRule[] {
  const seen = new Map<string, FieldRule>();
  const issues: { path: string; message: string }[] = [];
  const lists: [FieldVerdict, string[]][] = [
    ...FIELD_CLASSES.map((cls): [FieldVerdict, string[]] => [cls, fields[cls] ?? []]),
    ['allow', allow],
  ];
  for (const [verdict, patterns] of lists) {
    for (const pattern of patterns) {
      const key = patternKey(parseFieldPattern(pattern));
      const earlier = seen.get(key);
      if (earlier && earlier.verdict !== verdict) {
        issues.push({
          path: verdict === 'allow' ? 'allow' : `fields.${verdict}`,
          message: `field pattern ${JSON.stringify(pattern)} is also listed as ${earlier.verdict} (${JSON.stringify(earlier.pattern)})`,
        });
      }
      seen.set(key, { pattern, verdict });
    }
  }
  if (issues.length > 0) throw invalid(issues);
  return [...seen.values()];
}

function invalid(issues: { path: string; message: string }[]): IdempotencyConfigError {
  return new IdempotencyConfigError(
    `Invalid redaction policy: ${issues.map((i) => `${i.path || '(root)'}: ${i.message}`).join('; ')}`,
    { option: 'redactionPolicy', issues },
  );
}

/**
 * The built-in rules with a random per-process HMAC key (id `ephemeral-<hex>`). References made
 * with it are stable within one process only: fine for logs and tests; an audit trail that must
 * join references across workers and restarts needs `defineRedactionPolicy` with a configured key.
 */
export const DEFAULT_REDACTION_POLICY: RedactionPolicy = defineRedactionPolicy({
  version: DEFAULT_POLICY_VERSION,
  hmacKeys: [{ id: `ephemeral-${randomBytes(4).toString('hex')}`, secret: randomBytes(32) }],
});
