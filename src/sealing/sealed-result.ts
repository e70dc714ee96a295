import { IdempotencyConfigError, SealError } from '../errors/errors.js';
import { ERROR_CODES } from '../errors/idempotency-error.js';
import { canonicalJson } from '../fingerprint/canonical-json.js';
import { isSealed, type Keyring, type Sealed } from './keyring.js';

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
 * The sealed form of `value`: `{ ...declared public fields, $sealed }`. Public fields are taken
 * from a plain-object result only and must be JSON; every other part exists only sealed.
 */
export function sealResult<R>(value: R, publicFields: readonly string[], keyring: Keyring): SealedResult<R, never> {
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
  view[SEALED_FIELD] = keyring.seal(value, 'result');
  return view as SealedResult<R, never>;
}

/** True for a value of the {@link SealedResult} shape. */
export function isSealedResult(value: unknown): value is SealedResult<unknown> {
  return isPlainObject(value) && isSealed((value as Record<string, unknown>)[SEALED_FIELD]);
}

/**
 * Opens a sealed result (a {@link SealedResult}, or its `$sealed` string) and returns exactly
 * the value the processor returned: Buffers, Dates, nested data and unicode as they were.
 * Throws {@link SealError} (`IDEMPOTENCY_SEAL_KEY_UNKNOWN`, `IDEMPOTENCY_SEAL_INVALID`) when it
 * cannot, and `IDEMPOTENCY_SEAL_INVALID` for a value that is not sealed at all.
 *
 * @example
 * const job = await queue.getJob(jobId);
 * const result = unseal(job.returnvalue as SealedResult<AssetResult, 'assetId'>, keyring);
 */
export function unseal<R>(sealed: { readonly $sealed: Sealed<R> } | Sealed<R>, keyring: Keyring): R {
  if (keyring === undefined || typeof (keyring as Partial<Keyring>).open !== 'function') {
    throw new IdempotencyConfigError('unseal needs the keyring the value was sealed with', { option: 'keyring' });
  }
  if (isSealed(sealed)) return keyring.open<R>(sealed, 'result');
  if (isSealedResult(sealed)) return keyring.open<R>(sealed[SEALED_FIELD] as Sealed<R>, 'result');
  throw new SealError(ERROR_CODES.sealInvalid, { keyId: null, purpose: 'result' });
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}
