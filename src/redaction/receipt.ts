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
 * most events are clean.
 */
export class ReceiptBuilder {
  #counts: Map<string, number> | undefined;
  #paths: Set<string> | undefined;
  #keyIds: Set<string> | undefined;
  #truncated = false;

  constructor(
    readonly policyVersion: string,
    readonly root: string,
    readonly maxPaths: number,
  ) {}

  /** Records `times` hits of `rule` at `path`. */
  hit(rule: string, path: readonly PathSegment[], times = 1): void {
    this.#counts ??= new Map();
    this.#counts.set(rule, (this.#counts.get(rule) ?? 0) + times);
    const p = formatPath(this.root, path);
    this.#paths ??= new Set();
    if (this.#paths.has(p)) return;
    if (this.#paths.size < this.maxPaths) this.#paths.add(p);
    else this.#truncated = true;
  }

  /** Records that the output holds a reference made with `keyId`. */
  keyId(keyId: string): void {
    this.#keyIds ??= new Set();
    this.#keyIds.add(keyId);
  }

  build(): RedactionReceipt {
    if (this.#counts === undefined && this.#keyIds === undefined) {
      return { policyVersion: this.policyVersion, rules: [], paths: [], counts: {}, keyIds: [] };
    }
    const counts = [...(this.#counts ?? [])].sort(byRule);
    const receipt: RedactionReceipt = {
      policyVersion: this.policyVersion,
      rules: counts.map(([rule]) => rule),
      paths: [...(this.#paths ?? [])],
      counts: Object.fromEntries(counts),
      keyIds: [...(this.#keyIds ?? [])].sort(),
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
    policyVersion: first.policyVersion,
    rules: sorted.map(([rule]) => rule),
    paths: [...paths],
    counts: Object.fromEntries(sorted),
    keyIds: [...keyIds].sort(),
  };
  if (truncated) merged.truncated = true;
  return merged;
}
