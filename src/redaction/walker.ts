import { cardMarker, type HitSink, isCardNumber } from '../scanners/index.js';
import { isBinary } from './binary-value.js';
import { canonicalText, recogniseSummary, summariseContent } from './content-summary.js';
import { type RedactErrorOptions, redactErrorWith } from './error-shape.js';
import type { FieldClass } from './field-class.js';
import { keyInfo, type ScanBudget } from './key-info.js';
import { isMasked, maskPii } from './pii-mask.js';
import type { PolicyEngine } from './policy-engine.js';
import type { PathSegment, ReceiptBuilder } from './receipt.js';

const DEPTH_MARKER = '[redacted:depth]';
const CYCLE_MARKER = '[redacted:cycle]';
/** Integers from here on have 13+ digits and may be card numbers stored as numbers. */
const CARD_MIN = 1e12;
/** Up to this many open objects a linear search beats a Set (which gives every object an identity hash). */
const OPEN_LINEAR = 16;
/** Handed to the receipt once it lists all the paths it may: it only counts, and formats nothing long. */
const NO_PATH: readonly PathSegment[] = [];

const BUDGET_MARKER = '[redacted:budget]';
/** The first letters of `hmac:` and `ref:` references. */
const H = 104;
const R = 114;

function textLength(text: unknown): number {
  return typeof text === 'string' ? text.length : 0;
}

/**
 * Sets a property, also when the key is `__proto__` (which plain assignment would not). Plain
 * assignment otherwise: `Object.defineProperty` on every key is a runtime call each time.
 */
export function define(target: Record<string, unknown>, key: string, value: unknown): void {
  if (key === '__proto__')
    Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
  else target[key] = value;
}

/**
 * One redaction pass over a value: field classes on object keys, value scanners on every other
 * string, limits on size, depth and cycles. Copy-on-write: an object or array that needs no
 * change is returned as is, so a clean event allocates almost nothing.
 */
export class Walker implements HitSink {
  /** Current JSON path, for the receipt. */
  readonly path: PathSegment[] = [];
  /**
   * Objects on the current path, for cycle detection. An array, not a Set: it is a few entries
   * deep, and a Set would make V8 give every visited object an identity hash.
   */
  readonly #open: object[] = [];
  /** The same objects once the path is deeper than {@link OPEN_LINEAR}, so deep values stay linear. */
  #openSet: Set<object> | undefined;
  /** Normalised names of the enclosing keys, innermost last (array levels skipped), for path rules. */
  readonly #names: string[] = [];
  /** What is left to scan; past it, strings are summarised and keys replaced (fail closed). */
  readonly #budget: ScanBudget;
  /** Bumped at every step into a field or an item, so that hits at one path are told from the next. */
  #step = 0;
  #lastStep = -1;
  /** Distinct paths handed to the receipt so far. */
  #listed = 0;
  /** Hits of the string being scanned, counted per rule and recorded together (rules, then counts). */
  readonly #pendingRules: string[] = [];
  readonly #pendingCounts: number[] = [];
  #scanning = false;

  constructor(
    readonly engine: PolicyEngine,
    readonly receipt: ReceiptBuilder,
  ) {
    this.#budget = { remaining: engine.limits.scanBudget };
  }

  /** Scanner hits (`jwt`) become `scan.jwt`; ids with a namespace (`limit.truncated`) stay. */
  hit(rule: string): void {
    const id = rule.includes('.') ? rule : `scan.${rule}`;
    if (!this.#scanning) {
      this.#note(id, 1);
      return;
    }
    const i = this.#pendingRules.indexOf(id);
    if (i >= 0) this.#pendingCounts[i]!++;
    else {
      this.#pendingRules.push(id);
      this.#pendingCounts.push(1);
    }
  }

  /**
   * Records hits at the current path. Once the receipt lists as many paths as it may, it is
   * handed an empty path: it still counts, and formatting a deep path of long keys for every hit
   * (which made many hits deep down quadratic) is skipped.
   */
  #note(rule: string, times: number): void {
    if (this.#step !== this.#lastStep) {
      this.#lastStep = this.#step;
      this.#listed++;
    }
    this.receipt.hit(rule, this.#listed > this.engine.limits.maxReceiptPaths ? NO_PATH : this.path, times);
  }

  #push(segment: PathSegment): void {
    this.path.push(segment);
    this.#step++;
  }

  #pop(): void {
    this.path.pop();
    this.#step++;
  }

  #isOpen(value: object): boolean {
    return this.#openSet !== undefined ? this.#openSet.has(value) : this.#open.includes(value);
  }

  #enter(value: object): void {
    this.#open.push(value);
    if (this.#openSet !== undefined) this.#openSet.add(value);
    else if (this.#open.length > OPEN_LINEAR) this.#openSet = new Set(this.#open);
  }

  #leave(): void {
    const value = this.#open.pop();
    if (this.#openSet !== undefined && value !== undefined) {
      this.#openSet.delete(value);
      if (this.#open.length <= OPEN_LINEAR) this.#openSet = undefined;
    }
  }

  /** Scans one string (a value), its hits recorded once per rule. */
  #scan(text: string): string {
    this.#scanning = true;
    const out = this.engine.scanner.scan(text, this);
    this.#scanning = false;
    if (out !== text || this.#pendingRules.length > 0) {
      for (let i = 0; i < this.#pendingRules.length; i++) this.#note(this.#pendingRules[i]!, this.#pendingCounts[i]!);
      this.#pendingRules.length = 0;
      this.#pendingCounts.length = 0;
    }
    return out;
  }

  walk(value: unknown, depth: number): unknown {
    switch (typeof value) {
      case 'string':
        return this.#string(value);
      case 'number':
        return Number.isInteger(value) && Math.abs(value) >= CARD_MIN ? this.#integer(value) : value;
      case 'bigint':
        return value >= CARD_MIN || value <= -CARD_MIN ? this.#integer(value) : value;
      case 'object':
        return value === null ? null : this.#object(value, depth);
      default:
        return value;
    }
  }

  #string(text: string): string | object {
    const { keyring, limits } = this.engine;
    const over = text.length > limits.maxStringLength;
    if (over || text.length > this.#budget.remaining) {
      this.#note(over ? 'limit.oversize' : 'limit.budget', 1);
      this.receipt.keyId(keyring.currentId);
      return summariseContent(text, keyring);
    }
    this.#budget.remaining -= text.length;
    // A reference this policy made is opaque already; scanning it could only produce noise. Its
    // first letter is read first: most texts are no reference, and every text comes through here.
    const first = text.charCodeAt(0);
    if ((first === H && keyring.recognise(text, 'hmac')) || (first === R && keyring.recognise(text, 'ref'))) {
      return text;
    }
    return this.#scan(text);
  }

  /** A card number stored as a JSON number. */
  #integer(value: number | bigint): number | bigint | string {
    const digits = (value < 0 ? -value : value).toString();
    if (!isCardNumber(digits)) return value;
    this.hit('card');
    return cardMarker(digits);
  }

  #object(value: object, depth: number): unknown {
    if (depth >= this.engine.limits.maxDepth) {
      this.#note('limit.depth', 1);
      return DEPTH_MARKER;
    }
    if (this.#isOpen(value)) {
      this.#note('limit.cycle', 1);
      return CYCLE_MARKER;
    }
    if (Array.isArray(value)) return this.#array(value, depth);
    const proto: unknown = Object.getPrototypeOf(value);
    if (proto === Object.prototype || proto === null)
      return this.#record(value as Record<string, unknown>, depth, false);
    if (value instanceof Date) return value;
    if (isBinary(value)) {
      // Raw bytes may be an upload; keep only what content keeps.
      this.#note('value.binary', 1);
      this.receipt.keyId(this.engine.keyring.currentId);
      return summariseContent(value, this.engine.keyring);
    }
    if (value instanceof Error) {
      // An error's text is scanned too: it counts against the budget like any string.
      const size = textLength(value.message) + textLength(value.stack);
      if (size > this.#budget.remaining) {
        this.#note('limit.budget', 1);
        return { name: 'Error', message: BUDGET_MARKER };
      }
      this.#budget.remaining -= size;
      return this.error(value, {});
    }
    if (value instanceof Map) return this.#record(Object.fromEntries(value), depth, true);
    if (value instanceof Set) return this.#array([...value], depth);
    const toJSON = (value as { toJSON?: unknown }).toJSON;
    if (typeof toJSON === 'function') return this.walk(toJSON.call(value), depth);
    return this.#record(value as Record<string, unknown>, depth, true);
  }

  #array(arr: readonly unknown[], depth: number): unknown[] {
    this.#enter(arr);
    let out: unknown[] | undefined;
    for (let i = 0; i < arr.length; i++) {
      const item = arr[i];
      this.#push(i);
      const res = this.walk(item, depth + 1);
      this.#pop();
      if (out === undefined && res !== item) out = arr.slice(0, i);
      out?.push(res);
    }
    this.#leave();
    return out ?? (arr as unknown[]);
  }

  /** `copy`: build a new plain object even when nothing changes (the input was not a plain object). */
  #record(obj: Record<string, unknown>, depth: number, copy: boolean): Record<string, unknown> {
    const { matcher } = this.engine;
    this.#enter(obj);
    const keys = Object.keys(obj);
    let out: Record<string, unknown> | undefined = copy ? {} : undefined;
    for (let i = 0; i < keys.length; i++) {
      const key = keys[i]!;
      const val = obj[key];
      const info = keyInfo(this.engine, key, this.#budget);
      const verdict = info.hasPathRules ? matcher.classify(info.norm, this.#names, info.byName) : info.byName;
      this.#push(info.outKey);
      this.#names.push(info.norm);
      if (info.keyHits) for (const [rule, times] of info.keyHits) this.#note(rule, times);
      let res: unknown;
      let drop = false;
      if (verdict === undefined || verdict === 'allow') {
        res = this.walk(val, depth + 1);
      } else if (verdict === 'secret') {
        drop = true;
        this.#note('field.secret', 1);
      } else {
        res = this.applyClass(verdict, val, depth + 1);
      }
      this.#names.pop();
      this.#pop();
      if (out === undefined && (drop || res !== val || info.outKey !== key)) {
        out = {};
        for (let j = 0; j < i; j++) define(out, keys[j]!, obj[keys[j]!]);
      }
      if (out !== undefined && !drop) define(out, info.outKey, res);
    }
    this.#leave();
    return out ?? obj;
  }

  /** The value as a field of class `cls` keeps it (secrets are dropped by the caller, not here). */
  applyClass(cls: Exclude<FieldClass, 'secret'>, value: unknown, depth: number): unknown {
    if (value === null || value === undefined) return value;
    const { keyring } = this.engine;
    switch (cls) {
      case 'identifier':
      case 'credential_ref': {
        const kind = cls === 'identifier' ? 'hmac' : 'ref';
        const known = typeof value === 'string' ? keyring.recognise(value, kind) : undefined;
        if (known) {
          this.receipt.keyId(known);
          return value;
        }
        const text =
          typeof value === 'string' ? value : typeof value === 'object' ? canonicalText(value) : String(value);
        this.#note(`field.${cls}`, 1);
        this.receipt.keyId(keyring.currentId);
        return kind === 'hmac' ? keyring.identifierRef(text) : keyring.opaqueRef(text);
      }
      case 'content': {
        const known = recogniseSummary(value, keyring);
        if (known) {
          this.receipt.keyId(known);
          return value;
        }
        this.#note('field.content', 1);
        this.receipt.keyId(keyring.currentId);
        return summariseContent(value, keyring);
      }
      case 'pii': {
        const res = this.#mask(value, depth);
        if (res !== value) this.#note('field.pii', 1);
        return res;
      }
    }
  }

  /** Masks every leaf of a personal value (a string, or an address object). */
  #mask(value: unknown, depth: number): unknown {
    switch (typeof value) {
      case 'string':
        return maskPii(value);
      case 'number':
      case 'bigint': {
        const masked = maskPii(value.toString());
        return isMasked(masked) ? masked : '***';
      }
      case 'object': {
        if (value === null) return null;
        // A date of birth as a Date, a Buffer of a scanned passport: nothing of it is kept.
        if (value instanceof Date || isBinary(value)) return '***';
        if (depth >= this.engine.limits.maxDepth || this.#isOpen(value)) return DEPTH_MARKER;
        this.#enter(value);
        let out: unknown;
        if (Array.isArray(value)) out = value.map((v) => this.#mask(v, depth + 1));
        else {
          const obj: Record<string, unknown> = {};
          for (const [k, v] of Object.entries(value))
            define(obj, keyInfo(this.engine, k, this.#budget).outKey, this.#mask(v, depth + 1));
          out = obj;
        }
        this.#leave();
        return out;
      }
      default:
        return value;
    }
  }

  /** An error (thrown, or found inside a value), scrubbed; hits are recorded at the current path. */
  error(err: unknown, options: RedactErrorOptions): ReturnType<typeof redactErrorWith> {
    return redactErrorWith(this.engine, err, this, options, (v) => canonicalText(this.walk(v, 1)));
  }
}
