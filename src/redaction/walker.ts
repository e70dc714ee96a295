import { canonicalText, recogniseSummary, summariseContent } from './content-summary.js';
import { type RedactErrorOptions, redactErrorWith } from './error-shape.js';
import type { FieldClass } from './field-class.js';
import { keyInfo } from './key-info.js';
import { isMasked, maskPii } from './pii-mask.js';
import type { PolicyEngine } from './policy-engine.js';
import type { PathSegment, ReceiptBuilder } from './receipt.js';
import { cardMarker, isCardNumber } from './scanners/card-number.js';
import { scanText } from './scanners/scan-text.js';
import type { HitSink } from './scanners/scanner.js';

const DEPTH_MARKER = '[redacted:depth]';
const CYCLE_MARKER = '[redacted:cycle]';
/** Integers from here on have 13+ digits and may be card numbers stored as numbers. */
const CARD_MIN = 1e12;

/** Sets a property, also when the key is `__proto__` (which plain assignment would not). */
function define(target: Record<string, unknown>, key: string, value: unknown): void {
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

  constructor(
    readonly engine: PolicyEngine,
    readonly receipt: ReceiptBuilder,
  ) {}

  /** Scanner hits (`jwt`) become `scan.jwt`; ids with a namespace (`limit.truncated`) stay. */
  hit(rule: string): void {
    this.receipt.hit(rule.includes('.') ? rule : `scan.${rule}`, this.path);
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
    const { keyring, limits, scanners } = this.engine;
    if (text.length > limits.maxStringLength) {
      this.receipt.hit('limit.oversize', this.path);
      this.receipt.keyId(keyring.currentId);
      return summariseContent(text, keyring);
    }
    // A reference this policy made is opaque already; scanning it could only produce noise.
    if (keyring.recognise(text, 'hmac') || keyring.recognise(text, 'ref')) {
      return text;
    }
    return scanText(text, scanners, this);
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
      this.receipt.hit('limit.depth', this.path);
      return DEPTH_MARKER;
    }
    if (this.#open.includes(value)) {
      this.receipt.hit('limit.cycle', this.path);
      return CYCLE_MARKER;
    }
    if (Array.isArray(value)) return this.#array(value, depth);
    const proto: unknown = Object.getPrototypeOf(value);
    if (proto === Object.prototype || proto === null)
      return this.#record(value as Record<string, unknown>, depth, false);
    if (value instanceof Date) return value;
    if (value instanceof Uint8Array || value instanceof ArrayBuffer) {
      // Raw bytes may be an upload; keep only what content keeps.
      this.receipt.hit('value.binary', this.path);
      this.receipt.keyId(this.engine.keyring.currentId);
      return summariseContent(value, this.engine.keyring);
    }
    if (value instanceof Error) return this.error(value, {});
    if (value instanceof Map) return this.#record(Object.fromEntries(value), depth, true);
    if (value instanceof Set) return this.#array([...value], depth);
    const toJSON = (value as { toJSON?: unknown }).toJSON;
    if (typeof toJSON === 'function') return this.walk(toJSON.call(value), depth);
    return this.#record(value as Record<string, unknown>, depth, true);
  }

  #array(arr: readonly unknown[], depth: number): unknown[] {
    this.#open.push(arr);
    let out: unknown[] | undefined;
    for (let i = 0; i < arr.length; i++) {
      const item = arr[i];
      this.path.push(i);
      const res = this.walk(item, depth + 1);
      this.path.pop();
      if (out === undefined && res !== item) out = arr.slice(0, i);
      out?.push(res);
    }
    this.#open.pop();
    return out ?? (arr as unknown[]);
  }

  /**
   * Normalised names of the enclosing object keys, innermost last (array levels skipped). Built
   * from the path only when a path rule needs it (a key named like `name`), which is rare.
   */
  #ancestors(): string[] {
    const names: string[] = [];
    for (const segment of this.path) if (typeof segment === 'string') names.push(keyInfo(this.engine, segment).norm);
    return names;
  }

  /** `copy`: build a new plain object even when nothing changes (the input was not a plain object). */
  #record(obj: Record<string, unknown>, depth: number, copy: boolean): Record<string, unknown> {
    const { matcher } = this.engine;
    this.#open.push(obj);
    const keys = Object.keys(obj);
    let out: Record<string, unknown> | undefined = copy ? {} : undefined;
    for (let i = 0; i < keys.length; i++) {
      const key = keys[i]!;
      const val = obj[key];
      const info = keyInfo(this.engine, key);
      const verdict = info.hasPathRules ? matcher.classify(info.norm, this.#ancestors(), info.byName) : info.byName;
      this.path.push(info.outKey);
      if (info.keyHits) for (const rule of info.keyHits) this.receipt.hit(rule, this.path);
      let res: unknown;
      let drop = false;
      if (verdict === undefined || verdict === 'allow') {
        res = this.walk(val, depth + 1);
      } else if (verdict === 'secret') {
        drop = true;
        this.receipt.hit('field.secret', this.path);
      } else {
        res = this.applyClass(verdict, val, depth + 1);
      }
      this.path.pop();
      if (out === undefined && (drop || res !== val || info.outKey !== key)) {
        out = {};
        for (let j = 0; j < i; j++) define(out, keys[j]!, obj[keys[j]!]);
      }
      if (out !== undefined && !drop) define(out, info.outKey, res);
    }
    this.#open.pop();
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
        this.receipt.hit(`field.${cls}`, this.path);
        this.receipt.keyId(keyring.currentId);
        return kind === 'hmac' ? keyring.identifierRef(text) : keyring.opaqueRef(text);
      }
      case 'content': {
        const known = recogniseSummary(value, keyring);
        if (known) {
          this.receipt.keyId(known);
          return value;
        }
        this.receipt.hit('field.content', this.path);
        this.receipt.keyId(keyring.currentId);
        return summariseContent(value, keyring);
      }
      case 'pii': {
        const res = this.#mask(value, depth);
        if (res !== value) this.receipt.hit('field.pii', this.path);
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
        if (value instanceof Date || value instanceof Uint8Array) return '***';
        if (depth >= this.engine.limits.maxDepth || this.#open.includes(value)) return DEPTH_MARKER;
        this.#open.push(value);
        let out: unknown;
        if (Array.isArray(value)) out = value.map((v) => this.#mask(v, depth + 1));
        else {
          const obj: Record<string, unknown> = {};
          for (const [k, v] of Object.entries(value))
            define(obj, keyInfo(this.engine, k).outKey, this.#mask(v, depth + 1));
          out = obj;
        }
        this.#open.pop();
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
