/**
 * What a redaction did, without the values: which rules fired, where, how often, and which HMAC
 * keys the references in the output were made with. Stored next to the redacted event so that an
 * auditor can tell "this field was a secret and was dropped" from "there was nothing here".
 */
export type RedactionReceipt = {
  policyVersion: string;
  /** Rule ids that fired, sorted (`field.secret`, `scan.jwt`, `limit.depth`...). */
  rules: string[];
  /** JSON paths touched (`$.input.user.email`, `$.messages`), in visiting order, at most `maxReceiptPaths`. */
  paths: string[];
  /** Hits per rule id. */
  counts: Record<string, number>;
  /** Ids of the HMAC keys behind the references in the value (made now or recognised). */
  keyIds: string[];
  /** Present when more paths were touched than the receipt lists. */
  truncated?: true;
};

/** A JSON path segment: an object key or an array index. */
export type PathSegment = string | number;

const PLAIN_KEY = /^[A-Za-z_$][A-Za-z0-9_$]*$/;

/** `$.a.b[0]["odd key"]`. Keys are the redacted ones, so a path never carries a scanned value. */
export function formatPath(root: string, segments: readonly PathSegment[]): string {
  let out = root;
  for (const s of segments) {
    if (typeof s === 'number') out += `[${s}]`;
    else out += PLAIN_KEY.test(s) ? `.${s}` : `[${JSON.stringify(s)}]`;
  }
  return out;
}

function byRule([a]: [string, number], [b]: [string, number]): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/**
 * Collects hits during one walk. Allocates nothing until the first hit, because most values of
 * most events are clean; a handful of rules per event makes arrays with linear search cheaper
 * than Maps.
 */
export class ReceiptBuilder {
  #rules: string[] | undefined;
  #counts: number[] | undefined;
  #paths: string[] | undefined;
  #keyIds: string[] | undefined;
  #truncated = false;

  constructor(
    readonly policyVersion: string,
    readonly root: string,
    readonly maxPaths: number,
  ) {}

  /**
   * Records `times` hits of `rule` at `path`. The walk visits each path once and records all its
   * hits together, so comparing with the last path listed is enough to list each path once.
   */
  hit(rule: string, path: readonly PathSegment[], times = 1): void {
    this.#rules ??= [];
    this.#counts ??= [];
    const i = this.#rules.indexOf(rule);
    if (i < 0) {
      this.#rules.push(rule);
      this.#counts.push(times);
    } else this.#counts[i]! += times;
    const p = formatPath(this.root, path);
    this.#paths ??= [];
    if (this.#paths[this.#paths.length - 1] === p) return;
    if (this.#paths.length < this.maxPaths) this.#paths.push(p);
    else this.#truncated = true;
  }

  /** Records that the output holds a reference made with `keyId`. */
  keyId(keyId: string): void {
    this.#keyIds ??= [];
    if (!this.#keyIds.includes(keyId)) this.#keyIds.push(keyId);
  }

  build(): RedactionReceipt {
    const rules = this.#rules ?? [];
    const counts = this.#counts ?? [];
    const pairs: [string, number][] = rules.map((r, i) => [r, counts[i]!]);
    if (pairs.length > 1) pairs.sort(byRule);
    // Its keys in sorted order, as the audit chain's digest takes them (event-digest.ts): it
    // hashes the receipt as it is, without building it again.
    const receipt: RedactionReceipt = {
      counts: Object.fromEntries(pairs),
      keyIds: this.#keyIds === undefined ? [] : this.#keyIds.length > 1 ? this.#keyIds.sort() : this.#keyIds,
      paths: this.#paths ?? [],
      policyVersion: this.policyVersion,
      rules: pairs.map(([rule]) => rule),
    };
    if (this.#truncated) receipt.truncated = true;
    return receipt;
  }
}

/**
 * One receipt for several redacted parts of an event (details, error, result). Rule ids and key
 * ids are united, counts added, paths concatenated in order.
 */
export function mergeReceipts(first: RedactionReceipt, ...rest: RedactionReceipt[]): RedactionReceipt {
  const counts = new Map(Object.entries(first.counts));
  const paths = new Set(first.paths);
  const keyIds = new Set(first.keyIds);
  let truncated = first.truncated === true;
  for (const r of rest) {
    for (const [rule, n] of Object.entries(r.counts)) counts.set(rule, (counts.get(rule) ?? 0) + n);
    for (const p of r.paths) paths.add(p);
    for (const k of r.keyIds) keyIds.add(k);
    truncated ||= r.truncated === true;
  }
  const sorted = [...counts].sort(byRule);
  const merged: RedactionReceipt = {
    counts: Object.fromEntries(sorted),
    keyIds: [...keyIds].sort(),
    paths: [...paths],
    policyVersion: first.policyVersion,
    rules: sorted.map(([rule]) => rule),
  };
  if (truncated) merged.truncated = true;
  return merged;
}
