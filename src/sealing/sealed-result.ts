import { IdempotencyConfigError, SealError } from '../errors/errors.js';
import { ERROR_CODES } from '../errors/idempotency-error.js';
import { canonicalJson } from '../fingerprint/canonical-json.js';
import type { Keyring } from './keyring.js';
import { isSealed, placeMismatch, type Sealed, type SealPlace, sealedKeyId } from './sealed-text.js';

/** The field of a sealed result that holds the whole value, sealed. */
export const SEALED_FIELD = '$sealed';

/**
 * What the ledger records and BullMQ keeps (`returnvalue`, flows' `getChildrenValues`,
 * dashboards) for a result `R`: the fields `P` the operation declared public, in clear, and the
 * whole exact value sealed under {@link SEALED_FIELD}. {@link unseal} restores `R` exactly.
 */
export type SealedResult<R, P extends PropertyKey = never> = ([P] extends [never]
  ? unknown
  : { readonly [F in P & keyof R]: R[F] }) & {
  readonly $sealed: Sealed<R>;
};

/**
 * Where a result is recorded: the operation as the ledger names the row (a step's is
 * `operation#step`) and the bounded key. Its seal opens there only.
 */
export type ResultPlace = { operation: string; key: string };

/**
 * The sealed form of `value` for the row at `place`: `{ ...declared public fields, $sealed }`.
 * Public fields are taken from a plain-object result only and must be JSON; every other part
 * exists only sealed, and the sealed copy authenticates the public ones (see {@link openResult}).
 */
export function sealResult<R>(
  value: R,
  publicFields: readonly string[],
  keyring: Keyring,
  place: ResultPlace,
): SealedResult<R, never> {
  const view: Record<string, unknown> = {};
  if (publicFields.length > 0 && isPlainObject(value)) {
    for (const f of publicFields) {
      if (!Object.hasOwn(value, f)) continue;
      const v = (value as Record<string, unknown>)[f];
      if (v === undefined) continue;
      canonicalJson(v); // a public field is stored as JSON: refuse what JSON would alter
      view[f] = v;
    }
  }
  view[SEALED_FIELD] = keyring.seal(value, resultPlace(place));
  return view as SealedResult<R, never>;
}

/** True for a value of the {@link SealedResult} shape. */
export function isSealedResult(value: unknown): value is SealedResult<unknown> {
  return isPlainObject(value) && isSealed((value as Record<string, unknown>)[SEALED_FIELD]);
}

/**
 * A recorded result as a replay uses it, opened, after checking what the ledger held: a sealed
 * result (`IDEMPOTENCY_SEAL_REQUIRED` for a value in clear), sealed for this row
 * (`IDEMPOTENCY_SEAL_MISPLACED` for one copied from another key, operation or step), whose clear
 * fields are those of its sealed copy (`IDEMPOTENCY_SEAL_PUBLIC_MISMATCH`).
 */
export function openResult<R>(stored: unknown, keyring: Keyring, place: ResultPlace): R {
  if (!isSealedResult(stored)) throw new SealError(ERROR_CODES.sealRequired, { purpose: 'result' });
  const sealed = stored[SEALED_FIELD] as string;
  const value = keyring.open<R>(sealed, resultPlace(place));
  assertPublicFields(stored, value, sealed);
  return value;
}

/**
 * The checks of {@link openResult}, for a replay that hands the stored value on as it is: the
 * seal is authenticated for `place`, and opened into a value only when fields in clear are to be
 * compared with it.
 */
export function checkResult(stored: unknown, keyring: Keyring, place: ResultPlace): void {
  if (!isSealedResult(stored)) throw new SealError(ERROR_CODES.sealRequired, { purpose: 'result' });
  if (Object.keys(stored).length > 1) {
    openResult(stored, keyring, place);
    return;
  }
  keyring.openBytes(stored[SEALED_FIELD] as string, resultPlace(place));
}

/**
 * Opens a sealed result (a {@link SealedResult}, or its `$sealed` string) and returns exactly
 * the value the processor returned: Buffers, Dates, nested data and unicode as they were. The
 * place it was sealed for is authenticated, and checked against `expected` where given (the
 * operation and key of the job or row it was read from); the clear fields of a `SealedResult`
 * are checked against its sealed copy. Throws {@link SealError} when it cannot:
 * `IDEMPOTENCY_SEAL_KEY_UNKNOWN`, `IDEMPOTENCY_SEAL_INVALID` (also for a value that is not sealed
 * at all), `IDEMPOTENCY_SEAL_MISPLACED` (sealed for another place than `expected`),
 * `IDEMPOTENCY_SEAL_PUBLIC_MISMATCH` (a clear field changed), `IDEMPOTENCY_SEAL_UNBOUND`.
 *
 * @example
 * const job = await queue.getJob(jobId);
 * const result = unseal(job.returnvalue as SealedResult<AssetResult, 'assetId'>, keyring);
 * const checked = unseal(job.returnvalue, keyring, { operation: 'assets.create', key: ctxKey });
 */
export function unseal<R>(
  sealed: { readonly $sealed: Sealed<R> } | Sealed<R>,
  keyring: Keyring,
  expected?: Partial<ResultPlace>,
): R {
  if (keyring === undefined || typeof (keyring as Partial<Keyring>).openPlaced !== 'function') {
    throw new IdempotencyConfigError('unseal needs the keyring the value was sealed with', { option: 'keyring' });
  }
  const text = isSealed(sealed) ? sealed : isSealedResult(sealed) ? (sealed[SEALED_FIELD] as string) : undefined;
  if (text === undefined) throw new SealError(ERROR_CODES.sealInvalid, { keyId: null, purpose: 'result' });
  const opened = keyring.openPlaced<R>(text, 'result');
  const mismatch = expected
    ? placeMismatch(opened.place, { ...expected, field: '' })
    : placeMismatch(opened.place, { field: '' });
  if (mismatch.length > 0) {
    throw new SealError(ERROR_CODES.sealMisplaced, { keyId: sealedKeyId(text) ?? null, purpose: 'result', mismatch });
  }
  if (text !== sealed) assertPublicFields(sealed as Record<string, unknown>, opened.value, text);
  return opened.value;
}

function resultPlace(place: ResultPlace): SealPlace {
  return { purpose: 'result', operation: place.operation, key: place.key };
}

/** Every clear field of a sealed result is in its sealed copy, equal as JSON. */
function assertPublicFields(view: Record<string, unknown>, value: unknown, sealed: string): void {
  let differ = 0;
  for (const f of Object.keys(view)) {
    if (f === SEALED_FIELD) continue;
    const inSealed =
      isPlainObject(value) && Object.hasOwn(value, f) ? (value as Record<string, unknown>)[f] : undefined;
    if (inSealed === undefined || !sameJson(view[f], inSealed)) differ++;
  }
  if (differ > 0) {
    throw new SealError(ERROR_CODES.sealPublicMismatch, { keyId: sealedKeyId(sealed) ?? null, fields: differ });
  }
}

function sameJson(a: unknown, b: unknown): boolean {
  try {
    return canonicalJson(a) === canonicalJson(b);
  } catch {
    return false;
  }
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}
