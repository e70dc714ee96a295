import { inspect, types } from 'node:util';
import { isCleanName } from '../errors/clean-name.js';
import type { HitSink } from '../scanners/index.js';
import { scanBounded } from './bounded-scan.js';
import type { PolicyEngine } from './policy-engine.js';

/** A scrubbed error, fit for the ledger's error column, BullMQ's `failedReason` and logs. */
export type RedactedError = {
  name: string;
  /** The error's `code` when it is a short identifier-like string or a number. */
  code?: string;
  message: string;
  stack?: string;
  cause?: RedactedError;
  /** An `AggregateError`'s first errors, scrubbed the same way. */
  errors?: RedactedError[];
};

/** Options of `redactError`. */
export type RedactErrorOptions = {
  /**
   * Keep the (scrubbed) stack.
   * @defaultValue true
   */
  stack?: boolean;
  /**
   * How many `cause` levels to follow.
   * @defaultValue 3
   */
  maxCauseDepth?: number;
  /**
   * How many of an `AggregateError`'s `errors` to keep.
   * @defaultValue 0
   */
  maxAggregated?: number;
};

const SAFE_NAME = /^[A-Za-z_$][A-Za-z0-9_$.]{0,63}$/;
const SAFE_CODE = /^[A-Za-z0-9_.:-]{1,64}$/;

type ErrorLike = { name?: unknown; message?: unknown; code?: unknown; stack?: unknown; cause?: unknown };

function isErrorLike(value: unknown): value is ErrorLike {
  return (
    value instanceof Error ||
    (typeof value === 'object' && value !== null && typeof (value as ErrorLike).message === 'string')
  );
}

/** A property of a thrown value that may be a getter that throws: read as a string, or undefined. */
function read(value: object, prop: keyof ErrorLike): unknown {
  try {
    return (value as ErrorLike)[prop];
  } catch {
    return undefined;
  }
}

/** A class name that is an identifier and no token (`ghp_…` named as a class is not a name). */
function safeName(name: unknown): string {
  return typeof name === 'string' && SAFE_NAME.test(name) && isCleanName(name) ? name : 'Error';
}

/** A code that is an identifier and that no scanner objects to (`sk_live_…` is not a code). */
function safeCode(engine: PolicyEngine, code: unknown, sink: HitSink): string | undefined {
  const text = typeof code === 'number' && Number.isFinite(code) ? String(code) : code;
  if (typeof text !== 'string' || !SAFE_CODE.test(text)) return undefined;
  let flagged = false;
  engine.scanner.scan(text, {
    hit(rule) {
      flagged = true;
      sink.hit(rule);
    },
  });
  return flagged ? undefined : text;
}

/**
 * The scrubbed form of anything thrown. `describe` renders a thrown non-error value (an object
 * goes through the field classes first, so `throw { password }` loses the password).
 */
export function redactErrorWith(
  engine: PolicyEngine,
  err: unknown,
  sink: HitSink,
  options: RedactErrorOptions,
  describe: (value: unknown) => string,
  depth = 0,
): RedactedError {
  if (typeof err === 'string') return { name: 'Error', message: scanBounded(engine, err, sink) };
  // A Proxy's traps run on every read (and may throw, or answer differently each time): it is
  // shown as `util.inspect` shows it, which reads its target without running them.
  if (types.isProxy(err)) return { name: 'Proxy', message: scanBounded(engine, inspect(err, { depth: 2 }), sink) };
  let errorLike: boolean;
  try {
    errorLike = isErrorLike(err);
  } catch {
    errorLike = false;
  }
  if (!errorLike) return { name: 'NonError', message: scanBounded(engine, describe(err), sink) };
  const e = err as object;
  const rawMessage = read(e, 'message');
  const message = typeof rawMessage === 'string' ? rawMessage : describe(rawMessage);
  const out: RedactedError = { name: safeName(read(e, 'name')), message: '' };
  const code = safeCode(engine, read(e, 'code'), sink);
  if (code !== undefined) out.code = code;
  out.message = scanBounded(engine, message, sink);
  const stack = read(e, 'stack');
  if (options.stack !== false && typeof stack === 'string') out.stack = scanBounded(engine, stack, sink);
  const cause = read(e, 'cause');
  if (cause !== undefined && depth < (options.maxCauseDepth ?? 3)) {
    out.cause = redactErrorWith(engine, cause, sink, options, describe, depth + 1);
  }
  const errors = (options.maxAggregated ?? 0) > 0 && err instanceof AggregateError ? err.errors : undefined;
  if (Array.isArray(errors) && errors.length > 0 && depth < (options.maxCauseDepth ?? 3)) {
    out.errors = errors
      .slice(0, options.maxAggregated)
      .map((inner) => redactErrorWith(engine, inner, sink, options, describe, depth + 1));
  }
  return out;
}
