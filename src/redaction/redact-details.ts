import { recogniseSummary, summariseContent } from './content-summary.js';
import type { RedactionPolicy } from './define-policy.js';
import { normalizeName } from './normalize-name.js';
import { engineOf, type PolicyEngine } from './policy-engine.js';
import { OMITTED_KEY } from './policy-schema.js';
import { type PathSegment, ReceiptBuilder } from './receipt.js';
import type { RedactionResult, RedactOptions } from './redact.js';
import { define, Walker } from './walker.js';

/**
 * The summary that replaces the keys a details allow-list did not name. Only their number: a
 * key's name can be data (an e-mail address, a token, a customer's name used as a key), and no
 * test of a name can tell. Summaries of the earlier form `{ keys, count }` are still read (and
 * merged into the count) when details are redacted again.
 */
export type OmittedSummary = {
  /** How many keys were omitted. */
  count: number;
};

/** Options of {@link redactDetails}. */
export type RedactDetailsOptions = RedactOptions & {
  /**
   * A string in the kept details longer than this becomes a content summary `{ bytes, hash, type }`:
   * details are short facts, not prose, prompts or bodies.
   * @defaultValue {@link DEFAULT_MAX_DETAIL_TEXT}
   */
  maxTextLength?: number;
};

/** Longest string kept as text in audit details. */
export const DEFAULT_MAX_DETAIL_TEXT = 200;

/** Rule id of a details string replaced by its content summary. */
const LONG_TEXT_RULE = 'details.long_text';

/** The count of an `_omitted` summary (either form), or undefined when `value` is not one. */
function summaryCount(value: unknown): number | undefined {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined;
  const { keys, count, ...rest } = value as Partial<Record<string, unknown>>;
  if (Object.keys(rest).length > 0) return undefined;
  if (keys !== undefined && !(Array.isArray(keys) && keys.every((k) => typeof k === 'string'))) return undefined;
  return typeof count === 'number' && Number.isSafeInteger(count) && count >= 0 ? count : undefined;
}

/**
 * Keeps only the `details` keys the policy allow-lists for `action` (and for `'*'`), redacts
 * them like any value, replaces strings longer than `maxTextLength` by content summaries, and
 * replaces the rest by `_omitted: { count }`. An action the policy does not list keeps nothing
 * (fail closed). Names match normalised (`orderId` = `order_id`). An `_omitted` summary already
 * in `details` is merged (and not counted again in the receipt), so this is idempotent.
 *
 * @example
 * // policy.details: { 'payments.charge': ['amount', 'currency'] }
 * redactDetails('payments.charge', { amount: 12, currency: 'EUR', note: 'call me', 'x@y.io': 1 }, policy).value
 * // { amount: 12, currency: 'EUR', _omitted: { count: 2 } }
 */
export function redactDetails(
  action: string,
  details: Readonly<Record<string, unknown>> | undefined,
  policy: RedactionPolicy,
  options: RedactDetailsOptions = {},
): RedactionResult<Record<string, unknown>> {
  const engine = engineOf(policy);
  const forAction = engine.details.get(action);
  const forAll = engine.details.get('*');
  const kept: Record<string, unknown> = {};
  let earlier = 0;
  let count = 0;
  for (const [key, value] of Object.entries(details ?? {})) {
    if (key === OMITTED_KEY) {
      const n = summaryCount(value);
      if (n !== undefined) {
        earlier += n;
        continue;
      }
    }
    const norm = normalizeName(key);
    if (key !== OMITTED_KEY && (forAction?.has(norm) || forAll?.has(norm))) {
      define(kept, key, value);
      continue;
    }
    count++;
  }
  const root = options.rootPath ?? '$';
  const receipt = new ReceiptBuilder(engine.version, root, engine.limits.maxReceiptPaths);
  const walked = new Walker(engine, receipt).walk(kept, 0);
  const value = boundText(walked, [], engine, receipt, options.maxTextLength ?? DEFAULT_MAX_DETAIL_TEXT) as Record<
    string,
    unknown
  >;
  if (count > 0) receipt.hit('details.omitted', [], count);
  if (count + earlier > 0) {
    const summary: OmittedSummary = { count: count + earlier };
    return { value: { ...value, [OMITTED_KEY]: summary }, receipt: receipt.build() };
  }
  return { value, receipt: receipt.build() };
}

/**
 * `value` (already redacted) with every string longer than `max` replaced by its content
 * summary. Copy-on-write, like the walker; a summary the ring made is left as it is.
 */
function boundText(
  value: unknown,
  path: PathSegment[],
  engine: PolicyEngine,
  receipt: ReceiptBuilder,
  max: number,
): unknown {
  if (typeof value === 'string') {
    if (value.length <= max) return value;
    receipt.hit(LONG_TEXT_RULE, path);
    receipt.keyId(engine.keyring.currentId);
    return summariseContent(value, engine.keyring);
  }
  if (typeof value !== 'object' || value === null || value instanceof Date) return value;
  if (Array.isArray(value)) {
    let out: unknown[] | undefined;
    for (let i = 0; i < value.length; i++) {
      path.push(i);
      const res = boundText(value[i], path, engine, receipt, max);
      path.pop();
      if (res === value[i]) continue;
      out ??= [...value];
      out[i] = res;
    }
    return out ?? value;
  }
  if (recogniseSummary(value, engine.keyring)) return value;
  const obj = value as Record<string, unknown>;
  let out: Record<string, unknown> | undefined;
  for (const k of Object.keys(obj)) {
    const v = obj[k];
    path.push(k);
    const res = boundText(v, path, engine, receipt, max);
    path.pop();
    if (res === v) continue;
    out ??= { ...obj };
    define(out, k, res);
  }
  return out ?? value;
}
