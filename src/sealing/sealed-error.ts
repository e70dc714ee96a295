import { createHmac } from 'node:crypto';
import { inspect, types } from 'node:util';
import { isCleanName } from '../errors/clean-name.js';
import { SealError } from '../errors/errors.js';
import { ERROR_CODES, IdempotencyError } from '../errors/idempotency-error.js';
import { RetryableError, TerminalError } from '../errors/processor-errors.js';
import type { RecordedError } from '../ledger/types.js';
import type { Keyring } from './keyring.js';
import { hasOriginal, originalError } from './original-error.js';
import { isSealed, placeMismatch, type Sealed, sealedKeyId } from './sealed-text.js';

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
  if (isPlainError(thrown)) return thrown;
  const err = new Error(inspectSafely(thrown, 4));
  err.name = 'NonErrorThrown';
  Object.defineProperty(err, 'code', { value: 'NON_ERROR_THROWN', enumerable: true });
  return err;
}

/** An Error that is no Proxy: a Proxy's traps run on every read, so its text is taken as a value's. */
function isPlainError(thrown: unknown): thrown is Error {
  try {
    return !types.isProxy(thrown) && thrown instanceof Error;
  } catch {
    return false; // a prototype that throws when asked
  }
}

/** `util.inspect` that never throws (a getter or a custom inspect that throws is a text too). */
function inspectSafely(value: unknown, depth: number): string {
  try {
    return inspect(value, { depth, breakLength: 120 });
  } catch (err) {
    return `[uninspectable ${typeof value}: ${(() => {
      try {
        return String((err as Error)?.message);
      } catch {
        return 'its inspection threw';
      }
    })()}]`;
  }
}

/** A property read that never throws (getters, frozen or odd objects): undefined when it does. */
export function readSafely(value: object, prop: string): unknown {
  try {
    return (value as Record<string, unknown>)[prop];
  } catch {
    return undefined;
  }
}

/**
 * Where an error is recorded: the operation as the ledger names the row (a step's is
 * `operation#step`) and the bounded key (empty when the error came before the key was known).
 */
export type ErrorPlace = { operation: string; key: string };

/**
 * A thrown value as the ledger records it: the code and class name in clear when they pass the
 * grammar (else keyed refs), the public message or a marker (`sealed message, N bytes`), and the
 * whole text — message, stack, causes, AggregateError's errors — sealed. An error the library made
 * to stand for another one ({@link rememberOriginal}) is recorded as that original. The text is
 * sealed for `place`: it opens as that row's error only. Never throws, whatever getters, traps or
 * prototypes the value has.
 */
export function recordedError(thrown: unknown, keyring: Keyring, place: ErrorPlace): RecordedError {
  const original = hasOriginal(thrown) ? originalError(thrown) : thrown;
  // The same error is recorded in the ledger and then handed to BullMQ: seal it once per place.
  const memo = typeof original === 'object' && original !== null ? RECORDED.get(original) : undefined;
  if (memo && memo.keyring === keyring && memo.operation === place.operation && memo.key === place.key) {
    return memo.recorded;
  }
  const recorded = recordNew(original, keyring, place);
  if (typeof original === 'object' && original !== null) RECORDED.set(original, { keyring, ...place, recorded });
  return recorded;
}

const RECORDED = new WeakMap<object, { keyring: Keyring; operation: string; key: string; recorded: RecordedError }>();

function recordNew(thrown: unknown, keyring: Keyring, place: ErrorPlace): RecordedError {
  const err = asError(thrown);
  const rawCode = readSafely(err, 'code');
  const rawName = readSafely(err, 'name');
  const nameText = typeof rawName === 'string' && rawName ? rawName : 'Error';
  const name = cleanName(nameText, keyring);
  const code =
    typeof rawCode === 'string' && rawCode.length > 0
      ? cleanName(rawCode, keyring)
      : typeof rawCode === 'number' && Number.isInteger(rawCode)
        ? String(rawCode)
        : name;
  const rawMessage = readSafely(err, 'message');
  const message = typeof rawMessage === 'string' ? rawMessage : inspectSafely(rawMessage, 2);
  const pub = publicMessageSafely(err);
  const text = inspectSafely(err, 4).slice(0, MAX_TEXT_CHARS);
  const sealed = keyring.seal<SealedErrorText>(
    { name: nameText, ...(typeof rawCode === 'string' ? { code: rawCode } : {}), message, text },
    { purpose: 'error', operation: place.operation, key: place.key },
  );
  return { code, name, message: pub ?? sealedMarker(message), sealed };
}

function publicMessageSafely(err: Error): string | undefined {
  try {
    const pub = publicMessageOf(err);
    return typeof pub === 'string' ? pub : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Opens the sealed text of a recorded error, checking it was sealed for `expected` where given
 * (the operation and key of the row it was read from). Throws SealError when it cannot, when it
 * was sealed for another place (`IDEMPOTENCY_SEAL_MISPLACED`), and for text in clear where the
 * seal belongs (`IDEMPOTENCY_SEAL_REQUIRED`).
 */
export function openRecordedError(
  error: RecordedError,
  keyring: Keyring,
  expected?: Partial<ErrorPlace>,
): SealedErrorText | undefined {
  if (error.sealed === undefined || error.sealed === null) return undefined;
  if (!isSealed(error.sealed)) throw new SealError(ERROR_CODES.sealRequired, { purpose: 'error' });
  const opened = keyring.openPlaced<SealedErrorText>(error.sealed as Sealed<SealedErrorText>, 'error');
  const mismatch = placeMismatch(opened.place, { ...expected, field: '' });
  if (mismatch.length > 0) {
    throw new SealError(ERROR_CODES.sealMisplaced, {
      keyId: sealedKeyId(error.sealed) ?? null,
      purpose: 'error',
      mismatch,
    });
  }
  return opened.value;
}

/** What stands in clear for a sealed message. */
export function sealedMarker(message: string): string {
  return `sealed message, ${Buffer.byteLength(message)} bytes`;
}
