import pino, { type LoggerOptions } from 'pino';
import { NO_HITS, scanBounded } from '../../redaction/bounded-scan.js';
import { type RedactionPolicy, withValueScanner } from '../../redaction/define-policy.js';
import { FIELD_CLASSES, type FieldClass } from '../../redaction/field-class.js';
import { normalizeName } from '../../redaction/normalize-name.js';
import { engineOf, type PolicyEngine } from '../../redaction/policy-engine.js';
import { ReceiptBuilder } from '../../redaction/receipt.js';
import { redact } from '../../redaction/redact.js';
import { redactError } from '../../redaction/redact-error.js';
import { Walker } from '../../redaction/walker.js';
import type { ValueScanner } from '../index.js';

/** Options of {@link pinoRedactPaths}. */
export type PinoRedactPathsOptions = {
  /**
   * Classes whose field names become paths.
   * @defaultValue every class
   */
  classes?: readonly FieldClass[];
  /**
   * Nesting levels covered: 1 = top-level keys only, 2 = also `*.key`, 3 = also `*.*.key`.
   * @defaultValue 2
   */
  depth?: number;
};

const IDENT = /^[A-Za-z_$][A-Za-z0-9_$]*$/;
/** Bindings pino itself sets on every line; they are scanned, not classified (`name` is the logger's). */
const PINO_BINDINGS = new Set(['pid', 'hostname', 'name']);

/** `apiKey` → `apiKey`, `api_key`, `apikey`: the spellings pino's exact-match paths need. */
function spellings(name: string): string[] {
  const snake = name.replace(/([a-z0-9])([A-Z])/g, '$1_$2').toLowerCase();
  return [...new Set([name, snake, snake.replaceAll('_', '')])];
}

/**
 * Paths for pino's `redact` option from the policy's exact field names (and `a.b` path rules).
 * pino matches paths exactly and case-sensitively, so each name is given in camelCase, snake_case
 * and lower case; suffix rules (`*token`) cannot be expressed and are left to the `formatters.log`
 * hook of {@link pinoRedactionOptions}, which runs the full policy. The top-level `name` (the
 * logger's name) is not listed.
 */
export function pinoRedactPaths(policy: RedactionPolicy, options: PinoRedactPathsOptions = {}): string[] {
  const depth = Math.max(1, Math.min(options.depth ?? 2, 3));
  const out = new Set<string>();
  for (const cls of options.classes ?? FIELD_CLASSES) {
    for (const pattern of policy.fields[cls]) {
      if (pattern.startsWith('*')) continue;
      const segments = pattern.split('.');
      if (!segments.every((s) => IDENT.test(s))) continue;
      const last = segments.pop()!;
      for (const spelling of spellings(last)) {
        const path = [...segments, spelling].join('.');
        for (let level = 0; level < depth; level++) {
          if (level === 0 && path === 'name') continue;
          out.add(`${'*.'.repeat(level)}${path}`);
        }
      }
    }
  }
  return [...out];
}

/** pino's `hooks.logMethod`: the arguments of a log call, the method to call with them, the level. */
type LogMethodHook = (this: pino.Logger, args: unknown[], method: (...args: unknown[]) => void, level: number) => void;

/** The options {@link pinoRedactionOptions} returns, to spread into `pino({...})`. */
export type PinoRedactionOptions = Required<Pick<LoggerOptions, 'redact' | 'serializers' | 'onChild'>> & {
  formatters: {
    log: (object: Record<string, unknown>) => Record<string, unknown>;
    bindings: (bindings: Record<string, unknown>) => Record<string, unknown>;
  };
  hooks: { logMethod: LogMethodHook };
};

/** A pino serializer (pino's own type): the value of one top-level key of a log object, as it should be logged. */
export type PinoSerializer = pino.SerializerFn;

/** Settings of {@link pinoRedactionOptions}. */
export type PinoRedactionConfig = {
  /**
   * Your own serializers, by key. pino runs serializers after `formatters.log`, so what one
   * returns would be seen by pino's `redact` paths alone: given here, each one's output goes
   * through the policy (field classes and scanners at any depth; `msg` through the scanners).
   * Pass them here rather than in pino's own `serializers`, which would replace this one's.
   */
  serializers?: Readonly<Record<string, PinoSerializer>>;
  /**
   * Nesting levels of the `redact` paths ({@link pinoRedactPaths}' `depth`). Every `*.`-path
   * costs pino's redaction about 1 µs a log line, and is seen by every top-level key: at depth 2
   * (342 wildcard paths for the default policy) a three-field line cost 290–427 µs of CPU, at
   * depth 1 about 5 µs. `formatters.log` and the serializers above redact at every depth before pino's paths
   * run, so a deeper list only repeats them.
   * @defaultValue 1
   */
  pathDepth?: number;
  /**
   * Scans with this in place of the policy's built-in value scanners (its own scanners still
   * run first), as `createIdempotency`'s `valueScanner` does for the audit trail.
   * @defaultValue the policy's scanners
   */
  valueScanner?: ValueScanner;
};

/**
 * Everything pino needs to log through the policy:
 *
 * - `formatters.log` redacts each log object (field classes and value scanners at any depth, an
 *   `err` becomes a scrubbed `{ name, code, message, stack }`);
 * - `formatters.bindings` does the same for the root logger's bindings, and `onChild` for every
 *   child logger's bindings (pino resets the bindings formatter for children, so the child's
 *   serialised bindings are redacted once, when the child is made, and the formatter is put
 *   back on the child, so that `child.setBindings(…)` goes through it too);
 * - `hooks.logMethod` redacts the interpolation arguments (`logger.info('%s %o', secret, obj)`)
 *   before pino formats them: objects through the field classes, strings and errors scrubbed;
 * - `serializers.msg` scans the message (after printf-style interpolation);
 * - `serializers.err` scrubs errors that reach pino's error serialiser;
 * - your own serializers (`config.serializers`), each one's output redacted;
 * - `redact` lists {@link pinoRedactPaths} (top-level names by default: see `pathDepth`) with a
 *   censor that applies the field's class (a second line of defence: by the time it runs,
 *   `formatters.log` and the serializers have already redacted).
 *
 * @example
 * const logger = pino({ ...pinoRedactionOptions(policy), level: 'info' });
 * logger.info({ user: { email: 'jane@example.com' } }, 'token %s', 'ghp_…'); // both scrubbed
 */
export function pinoRedactionOptions(given: RedactionPolicy, config: PinoRedactionConfig = {}): PinoRedactionOptions {
  const policy = config.valueScanner === undefined ? given : withValueScanner(given, config.valueScanner);
  const engine = engineOf(policy);
  const scan = (text: unknown) => (typeof text === 'string' ? scanBounded(engine, text, NO_HITS) : text);
  const yours: Record<string, PinoSerializer> = {};
  for (const [key, serialize] of Object.entries(config.serializers ?? {})) {
    yours[key] =
      key === 'msg'
        ? (value) => scan(serialize(value))
        : (value) => {
            const out = serialize(value);
            return out instanceof Error ? redactError(out, policy) : redact(out, policy).value;
          };
  }
  const bindings = (raw: Record<string, unknown>): Record<string, unknown> => {
    const [own, rest] = split(raw);
    // A plain object again: pino calls `hasOwnProperty` on what this returns.
    const out: Record<string, unknown> = { ...(redact(rest, policy).value as Record<string, unknown>) };
    for (const [k, v] of Object.entries(own)) out[k] = scan(v);
    return out;
  };
  return {
    redact: {
      paths: pinoRedactPaths(policy, { depth: config.pathDepth ?? 1 }),
      censor: (value: unknown, path: string[]) => censor(engine, value, path),
    },
    formatters: {
      log: (object) => redact(object, policy).value as Record<string, unknown>,
      bindings,
    },
    hooks: {
      logMethod(args, method) {
        method.apply(this, redactArguments(policy, args));
      },
    },
    onChild: (child) => {
      redactChildBindings(policy, child);
      keepBindingsFormatter(child, bindings);
    },
    serializers: {
      msg: scan,
      err: (err: unknown) => (err instanceof Error ? redactError(err, policy) : err),
      ...yours,
    },
  };
}

/**
 * The censor for a pino path: the value as the class of the field leaves it. pino passes a
 * symbol for a `*` segment; only the string segments count, so `*.email` is judged as `email`.
 */
function censor(engine: PolicyEngine, value: unknown, path: readonly unknown[]): unknown {
  const walker = new Walker(engine, new ReceiptBuilder(engine.version, '$', 0));
  const names = path.filter((s): s is string => typeof s === 'string').map(normalizeName);
  const last = names.pop();
  // Behind a `*` the parent is unknown; a name that path rules judge by its parent (`name` is
  // personal in `user`, not in `err`) then gets the scanners only. `formatters.log`, which sees
  // the whole object, has already applied the right class.
  const blind = names.length + 1 < path.length && last !== undefined && engine.matcher.pathRules(last) !== undefined;
  const verdict = last === undefined || blind ? undefined : engine.matcher.classify(last, names);
  if (verdict === 'secret') return '[redacted:secret]';
  if (verdict === undefined || verdict === 'allow') return walker.walk(value, 0);
  return walker.applyClass(verdict, value, 0);
}

/**
 * The arguments of a log call with its interpolation values redacted. The merging object (a
 * first object argument) is left to `formatters.log`, and the message string to
 * `serializers.msg`, which sees it after interpolation.
 */
function redactArguments(policy: RedactionPolicy, args: readonly unknown[]): unknown[] {
  const first = typeof args[0] === 'object' && args[0] !== null ? 1 : 0;
  if (args.length <= first + 1) return args as unknown[];
  const out = args.slice();
  for (let i = first + 1; i < out.length; i++) {
    const v = out[i];
    if (v instanceof Error) out[i] = redactError(v, policy);
    else if (typeof v === 'string' || (typeof v === 'object' && v !== null)) out[i] = redact(v, policy).value;
  }
  return out;
}

/**
 * Puts the bindings formatter back on a child logger (pino gives children a pass-through one),
 * so that `child.setBindings(…)` is redacted like the child's first bindings.
 */
function keepBindingsFormatter(child: object, bindings: (raw: Record<string, unknown>) => Record<string, unknown>) {
  const holder = child as Record<symbol, unknown>;
  const formatters = holder[pino.symbols.formattersSym] as Record<string, unknown> | undefined;
  if (formatters === undefined || formatters.bindings === bindings) return;
  holder[pino.symbols.formattersSym] = { ...formatters, bindings };
}

/** pino's own bindings and the rest (null-prototype objects, so a `__proto__` key stays a key). */
function split(bindings: Record<string, unknown>): [Record<string, unknown>, Record<string, unknown>] {
  const own: Record<string, unknown> = Object.create(null);
  const rest: Record<string, unknown> = Object.create(null);
  for (const [k, v] of Object.entries(bindings)) (PINO_BINDINGS.has(k) ? own : rest)[k] = v;
  return [own, rest];
}

/** Rewrites a child logger's serialised bindings (`,"k":v,...`) through the policy. */
function redactChildBindings(policy: RedactionPolicy, child: object): void {
  const holder = child as Record<symbol, unknown>;
  const chindings = holder[pino.symbols.chindingsSym];
  if (typeof chindings !== 'string' || chindings.length === 0) return;
  let parsed: unknown;
  try {
    parsed = JSON.parse(`{${chindings.slice(1)}}`);
  } catch {
    // pino wrote it with its own stringify, so this does not happen; if it did, drop (fail closed).
    holder[pino.symbols.chindingsSym] = '';
    return;
  }
  const [own, rest] = split(parsed as Record<string, unknown>);
  const out = { ...own, ...(redact(rest, policy).value as Record<string, unknown>) };
  const json = JSON.stringify(out);
  holder[pino.symbols.chindingsSym] = json === '{}' ? '' : `,${json.slice(1, -1)}`;
}
