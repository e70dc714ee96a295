import { UnrecoverableError } from 'bullmq';
import type { IdempotencyError } from '../errors/idempotency-error.js';
import type { RecordedError } from '../ledger/types.js';
import { WAIT_NAMES } from '../shared/bullmq.js';
import { originalError, rememberOriginal } from './original-error.js';
import { publicMessageOf, sealedMarker } from './sealed-error.js';

// What of an error reaches BullMQ, and so Redis (failedReason, stacktrace, the events stream) and
// every `failed` listener: a new error built from codes here, beside the sealing it relies on; the
// worker and ctx.confirm() both fail jobs this way. The error thrown is never rewritten in place (a
// Proxy or a frozen error would keep its text) and never travels as `cause`.

/** Errors whose message and stack the library built for BullMQ: already fit for Redis. */
const SEALED_FOR_BULLMQ = new WeakSet<object>();
/** How each of them was built, so a hint can be added once the key is known. */
const BUILT = new WeakMap<
  object,
  {
    line: string;
    code: string;
    sealed: string | undefined;
    kind: BullmqFailureKind;
    hint: string | undefined;
    name: string | undefined;
  }
>();

/** How BullMQ should take a failed attempt: retried (within its attempts) or failed for good. */
export type BullmqFailureKind = 'retry' | 'unrecoverable';

/**
 * The error BullMQ gets for a recorded error: `<code> (<Class>): <public message or marker>`
 * (`<Class>: …` when the code is the class name), then `hint` when given, as its message (BullMQ's
 * `failedReason`); its stack is that line and the sealed text (`stacktrace`), so an operator with
 * the key can read it all. It carries `code` and nothing else: no `cause`, no `details`, no
 * property of the error it stands for, which {@link originalError} returns in this process.
 * An unrecoverable one is an `UnrecoverableError`, so BullMQ does not retry it.
 */
export function errorForBullmq(
  recorded: RecordedError,
  thrown: unknown,
  kind: BullmqFailureKind,
  hint?: string,
): Error {
  const name = recorded.name ?? 'Error';
  const head = recorded.code === name ? name : `${recorded.code} (${name})`;
  return build(`${head}: ${recorded.message}`, recorded.code, recorded.sealed, thrown, kind, hint, name);
}

/** Options of {@link unrecoverable}. */
export type UnrecoverableOptions = {
  /** Appended to the message: how to open the stored copy. */
  hint?: string;
  /** What the error stands for, when not `err` itself (a processor's error behind its recorded failure). */
  original?: unknown;
  /** The sealed text of `original`, kept in the stack. */
  sealed?: string;
};

/**
 * Fails the job now, without retries. The message starts with the stable code so BullMQ's
 * `failedReason` shows it, followed by the error's public message (or the sealed marker for the
 * few library errors whose text quotes application data). It carries the `code`; `details` and
 * `cause` stay on the library error, which {@link originalError} returns in this process.
 */
export function unrecoverable(err: IdempotencyError, options: UnrecoverableOptions = {}): UnrecoverableError {
  const message = `${err.code}: ${publicMessageOf(err) ?? sealedMarker(err.message)}`;
  const thrown = 'original' in options ? options.original : err;
  return build(message, err.code, options.sealed, thrown, 'unrecoverable', options.hint) as UnrecoverableError;
}

/** `err` (made by {@link unrecoverable} or {@link errorForBullmq}) again, with `hint` appended; `err` when it has one. */
export function withHint(err: Error, hint: string): Error {
  const made = BUILT.get(err);
  if (!made || made.hint !== undefined) return err;
  return build(made.line, made.code, made.sealed, originalError(err), made.kind, hint, made.name);
}

function build(
  line: string,
  code: string,
  sealed: string | undefined,
  thrown: unknown,
  kind: BullmqFailureKind,
  hint: string | undefined,
  name?: string,
): Error {
  const message = hint ? `${line}; ${hint}` : line;
  const err = kind === 'unrecoverable' ? new UnrecoverableError(message) : new Error(message);
  // The class name of what was thrown, unless BullMQ would take it for one of its signals; like
  // an Error's own, not enumerable, so `code` is all a serialiser lists.
  const shown = kind === 'retry' && name && !WAIT_NAMES.has(name) && name !== 'UnrecoverableError' ? name : err.name;
  Object.defineProperty(err, 'name', { value: shown, writable: true, configurable: true, enumerable: false });
  Object.defineProperty(err, 'code', { value: code, writable: true, configurable: true, enumerable: true });
  const top = `${err.name}: ${message}`;
  Object.defineProperty(err, 'stack', {
    value: sealed ? `${top}\n    sealed: ${sealed}` : top,
    writable: true,
    configurable: true,
    enumerable: false,
  });
  rememberOriginal(err, thrown);
  SEALED_FOR_BULLMQ.add(err);
  BUILT.set(err, { line, code, sealed, kind, hint, name });
  return err;
}

/** True for an error {@link unrecoverable} or {@link errorForBullmq} made. */
export function isSealedForBullmq(err: unknown): boolean {
  return typeof err === 'object' && err !== null && SEALED_FOR_BULLMQ.has(err);
}
