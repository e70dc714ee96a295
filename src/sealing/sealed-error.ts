import { createHmac } from 'node:crypto';
import { inspect } from 'node:util';
import { isCleanName } from '../errors/clean-name.js';
import { IdempotencyError } from '../errors/idempotency-error.js';
import { RetryableError, TerminalError } from '../errors/processor-errors.js';
import type { RecordedError } from '../ledger/types.js';
import type { Keyring, Sealed } from './keyring.js';

/** What the sealed part of a recorded error holds: the whole text, as `util.inspect` shows it. */
export type SealedErrorText = {
  name: string;
  code?: string;
  message: string;
  /** The error as `util.inspect` prints it: stack, cause chain, AggregateError's errors, own properties. */
  text: string;
};

/** Longest inspected text kept (sealed) for one error. */
const MAX_TEXT_CHARS = 32 * 1024;
/** A code or name in clear when it is clean, else a keyed ref (`ref:<keyId>:<22 chars>`) that joins equal values. */
export function cleanName(value: string, keyring: Keyring): string {
  if (isCleanName(value)) return value;
  const [key] = keyring.refKeys();
  const mac = createHmac('sha256', (key as { secret: Uint8Array }).secret)
    .update('error-name\0')
    .update(value)
    .digest('base64url');
  return `ref:${keyring.currentId}:${mac.slice(0, 22)}`;
}

/**
 * The message of `err` that may stay in clear, or undefined when its text must be sealed.
 * Public: a `TerminalError`'s or `RetryableError`'s explicit `publicMessage`, and the library's
 * own errors (their `publicMessage`, which leaves out any data they quote). Anything else is sealed.
 */
export function publicMessageOf(err: unknown): string | undefined {
  if (err instanceof TerminalError || err instanceof RetryableError) return err.publicMessage;
  if (err instanceof IdempotencyError) return err.publicMessage;
  return undefined;
}

/** A thrown value as an Error: non-errors (strings, plain objects, numbers) become `NonErrorThrown`. */
export function asError(thrown: unknown): Error {
  if (thrown instanceof Error) return thrown;
  const err = new Error(inspect(thrown, { depth: 4, breakLength: Infinity }));
  err.name = 'NonErrorThrown';
  Object.defineProperty(err, 'code', { value: 'NON_ERROR_THROWN', enumerable: true });
  return err;
}

/**
 * A thrown value as the ledger records it: the code and class name in clear when they pass the
 * grammar (else keyed refs), the public message or a marker (`sealed message, N bytes`), and the
 * whole text — message, stack, causes, AggregateError's errors — sealed.
 */
export function recordedError(thrown: unknown, keyring: Keyring): RecordedError {
  // The same error is recorded in the ledger and then handed to BullMQ: seal it once.
  const memo = typeof thrown === 'object' && thrown !== null ? RECORDED.get(thrown) : undefined;
  if (memo && memo.keyring === keyring) return memo.recorded;
  const recorded = recordNew(thrown, keyring);
  if (typeof thrown === 'object' && thrown !== null) RECORDED.set(thrown, { keyring, recorded });
  return recorded;
}

const RECORDED = new WeakMap<object, { keyring: Keyring; recorded: RecordedError }>();

function recordNew(thrown: unknown, keyring: Keyring): RecordedError {
  const err = asError(thrown);
  const rawCode = (err as { code?: unknown }).code;
  const name = cleanName(typeof err.name === 'string' && err.name ? err.name : 'Error', keyring);
  const code =
    typeof rawCode === 'string' && rawCode.length > 0
      ? cleanName(rawCode, keyring)
      : typeof rawCode === 'number' && Number.isInteger(rawCode)
        ? String(rawCode)
        : name;
  const message = String(err.message ?? '');
  const pub = publicMessageOf(err);
  const text = inspect(err, { depth: 4, breakLength: 120 }).slice(0, MAX_TEXT_CHARS);
  const sealed = keyring.seal<SealedErrorText>(
    { name: String(err.name), ...(typeof rawCode === 'string' ? { code: rawCode } : {}), message, text },
    'error',
  );
  return { code, name, message: pub ?? sealedMarker(message), sealed };
}

/** Opens the sealed text of a recorded error. Throws SealError when it cannot. */
export function openRecordedError(error: RecordedError, keyring: Keyring): SealedErrorText | undefined {
  return error.sealed ? keyring.open<SealedErrorText>(error.sealed as Sealed<SealedErrorText>, 'error') : undefined;
}

/** What stands in clear for a sealed message. */
export function sealedMarker(message: string): string {
  return `sealed message, ${Buffer.byteLength(message)} bytes`;
}

/**
 * Rewrites a thrown error in place for BullMQ, which stores `message` as `failedReason` and
 * `stack` in `stacktrace`: the message becomes `<code> (<Name>): <public message or marker>` and
 * the stack one line of it plus the sealed text, so an operator with the key can read it all.
 * Causes and AggregateError's `errors` are removed from the thrown object (they are in the sealed
 * text). The class is kept, so `instanceof` and BullMQ's recognition of `UnrecoverableError` work.
 */
export function sealThrown(err: Error, recorded: RecordedError): Error {
  const name = recorded.name ?? 'Error';
  const head = recorded.code === name ? name : `${recorded.code} (${name})`;
  const message = `${head}: ${recorded.message}`;
  if (!Object.isExtensible(err) || Object.isFrozen(err)) {
    // A frozen error cannot be rewritten: BullMQ gets a plain one in its place.
    const plain = new Error(message);
    plain.name = name;
    plain.stack = `${name}: ${message}\n    sealed: ${recorded.sealed ?? ''}`;
    return plain;
  }
  Object.defineProperty(err, 'message', { value: message, writable: true, configurable: true, enumerable: false });
  Object.defineProperty(err, 'stack', {
    value: `${name}: ${message}\n    sealed: ${recorded.sealed ?? ''}`,
    writable: true,
    configurable: true,
    enumerable: false,
  });
  if (err.name !== name) err.name = name;
  if ('cause' in err) delete err.cause;
  if (err instanceof AggregateError) Object.defineProperty(err, 'errors', { value: [], configurable: true });
  return err;
}
