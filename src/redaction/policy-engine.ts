import { IdempotencyConfigError } from '../errors/errors.js';
import type { CustomScannerInput, ValueScanner } from '../scanners/index.js';
import type { FieldVerdict } from './field-class.js';
import type { HmacKeyring } from './hmac-keyring.js';
import type { NameMatcher } from './name-matcher.js';

/** The limits a policy enforces while walking a value. */
export type RedactionLimits = {
  maxStringLength: number;
  maxDepth: number;
  maxReceiptPaths: number;
  maxKeyLength: number;
  scanBudget: number;
};

/** What the walker needs to know about an object key; computed once per distinct key. */
export type KeyInfo = {
  /** The key as written to the output: scanned, so an e-mail used as a key is masked. */
  outKey: string;
  /** Normalised output key, for class rules and for the ancestors of path rules. */
  norm: string;
  /** Verdict from the name alone. */
  byName: FieldVerdict | undefined;
  /** Whether a path rule ends in this name (then the ancestors decide). */
  hasPathRules: boolean;
  /** Rule ids the key scan hit (each with its count), recorded at each use. */
  keyHits: readonly (readonly [string, number])[] | undefined;
};

/**
 * The compiled, private half of a policy: matcher, keys, scanners. Held in a WeakMap rather than
 * on the policy object so that logging or serialising a policy can never reveal key material.
 */
export type PolicyEngine = {
  version: string;
  matcher: NameMatcher;
  keyring: HmacKeyring;
  /** What every string the policy keeps is scanned with. */
  scanner: ValueScanner;
  /** The policy's own scanners, kept to run before a scanner that replaces the built-in ones. */
  ownScanners: readonly CustomScannerInput[];
  /** Whether a name that no rule matches is still judged a secret by its words (`userPassword`). */
  inferSecretNames: boolean;
  /** Allow-listed detail keys (normalised) per action; `*` for all actions. */
  details: ReadonlyMap<string, ReadonlySet<string>>;
  limits: RedactionLimits;
  /** Distinct object keys seen so far; keys repeat across events, so this is almost always a hit. */
  keys: Map<string, KeyInfo>;
  /**
   * What the policy does, as a digest of its definition (policy-fingerprint.ts): two processes
   * whose policies have the same fingerprint redact an event alike. Undefined for a policy whose
   * definition is not all known (one with a replaced value scanner).
   */
  fingerprint: string | undefined;
};

const ENGINES = new WeakMap<object, PolicyEngine>();

/** Attaches an engine to its public policy object. */
export function attachEngine(policy: object, engine: PolicyEngine): void {
  ENGINES.set(policy, engine);
}

/** The engine of a policy made by `defineRedactionPolicy`; a clear error for anything else. */
export function engineOf(policy: object): PolicyEngine {
  const engine = ENGINES.get(policy);
  if (!engine) {
    throw new IdempotencyConfigError(
      'Not a compiled redaction policy: create it with defineRedactionPolicy() or use DEFAULT_REDACTION_POLICY',
      { option: 'redactionPolicy' },
    );
  }
  return engine;
}
