import { NO_HITS } from './bounded-scan.js';
import type { RedactionPolicy } from './define-policy.js';
import { normalizeName } from './normalize-name.js';
import { engineOf } from './policy-engine.js';
import { OMITTED_KEY } from './policy-schema.js';
import { ReceiptBuilder } from './receipt.js';
import type { RedactionResult, RedactOptions } from './redact.js';
import { shannonEntropy } from './scanners/checksums.js';
import { scanText } from './scanners/scan-text.js';
import { Walker } from './walker.js';

/** The summary that replaces the keys a details allow-list did not name. */
export type OmittedSummary = {
  /** Names of omitted keys that are plain names (a key that looks like data is counted, not named). */
  keys: string[];
  /** How many keys were omitted, named or not. */
  count: number;
};

const NAME = /^[A-Za-z_][A-Za-z0-9_.-]{0,63}$/;
/** At most this many omitted names are listed; the count covers the rest. */
const MAX_NAMES = 32;

/**
 * Whether an omitted key may be named in the summary: a short identifier-like name that no
 * scanner objects to and that is not random (a token used as a key). Anything else is only
 * counted: fail closed.
 */
function nameable(engine: ReturnType<typeof engineOf>, key: string): boolean {
  if (!NAME.test(key)) return false;
  if (key.length >= 16 && shannonEntropy(key) >= 3.5) return false;
  return scanText(key, engine.scanners, NO_HITS) === key;
}

function isSummary(value: unknown): value is OmittedSummary {
  if (typeof value !== 'object' || value === null) return false;
  const { keys, count } = value as Partial<Record<string, unknown>>;
  return (
    Array.isArray(keys) &&
    keys.every((k) => typeof k === 'string') &&
    typeof count === 'number' &&
    Number.isSafeInteger(count) &&
    count >= 0
  );
}

/**
 * Keeps only the `details` keys the policy allow-lists for `action` (and for `'*'`), redacts
 * them like any value, and replaces the rest by `_omitted: { keys, count }`. An action the
 * policy does not list keeps nothing (fail closed). Names match normalised (`orderId` =
 * `order_id`). An `_omitted` summary already in `details` is merged, so this is idempotent.
 *
 * @example
 * // policy.details: { 'payments.charge': ['amount', 'currency'] }
 * redactDetails('payments.charge', { amount: 12, currency: 'EUR', note: 'call me', 'x@y.io': 1 }, policy).value
 * // { amount: 12, currency: 'EUR', _omitted: { keys: ['note'], count: 2 } }
 */
export function redactDetails(
  action: string,
  details: Readonly<Record<string, unknown>> | undefined,
  policy: RedactionPolicy,
  options: RedactOptions = {},
): RedactionResult<Record<string, unknown>> {
  const engine = engineOf(policy);
  const forAction = engine.details.get(action);
  const forAll = engine.details.get('*');
  const kept: Record<string, unknown> = {};
  const names: string[] = [];
  let count = 0;
  for (const [key, value] of Object.entries(details ?? {})) {
    if (key === OMITTED_KEY && isSummary(value)) {
      count += value.count;
      for (const k of value.keys)
        if (nameable(engine, k) && names.length < MAX_NAMES && !names.includes(k)) names.push(k);
      continue;
    }
    const norm = normalizeName(key);
    if (key !== OMITTED_KEY && (forAction?.has(norm) || forAll?.has(norm))) {
      Object.defineProperty(kept, key, { value, enumerable: true, writable: true, configurable: true });
      continue;
    }
    count++;
    if (names.length < MAX_NAMES && nameable(engine, key)) names.push(key);
  }
  const root = options.rootPath ?? '$';
  const receipt = new ReceiptBuilder(engine.version, root, engine.limits.maxReceiptPaths);
  const value = new Walker(engine, receipt).walk(kept, 0) as Record<string, unknown>;
  if (count > 0) {
    receipt.hit('details.omitted', [], count);
    const summary: OmittedSummary = { keys: names, count };
    return { value: { ...value, [OMITTED_KEY]: summary }, receipt: receipt.build() };
  }
  return { value, receipt: receipt.build() };
}
