import { storableText } from '../db/storable.js';
import { PayloadTooLargeError, SealError, SerializationError } from '../errors/errors.js';
import { ERROR_CODES } from '../errors/idempotency-error.js';
import { canonicalJson } from '../fingerprint/canonical-json.js';
import { type LedgerKeyring, MAX_ERROR_MESSAGE_LENGTH } from './ledger-options.js';
import type { RecordedError } from './types.js';

/** The field of a sealed result (as `sealResult` makes it) that holds the whole value. */
const SEALED = '$sealed';

/**
 * Results and errors as the ledger stores them: sealed for their row when the ledger has a
 * keyring (see `LedgerOptions.keyring`), bounded, and storable by Postgres.
 */
export class StoredValues {
  constructor(
    private readonly keyring: LedgerKeyring | undefined,
    private readonly maxResultBytes: number,
  ) {}

  /** A result as this ledger stores it: sealed for the key's row when it has a keyring, else as given. */
  sealed(result: unknown, key: string): unknown {
    return this.keyring ? { [SEALED]: this.keyring.seal(result, { purpose: 'result', operation: '', key }) } : result;
  }

  /**
   * A stored result as a replay returns it: opened when this ledger has a keyring, after checking
   * it was sealed for this row (its key, and no operation or the row's). With a keyring, a result
   * in clear is refused (`IDEMPOTENCY_SEAL_REQUIRED`), and one sealed for another row too
   * (`IDEMPOTENCY_SEAL_MISPLACED`).
   */
  opened(stored: unknown, key: string, operation: string): unknown {
    if (!this.keyring) return stored;
    const sealed = isObject(stored) ? stored[SEALED] : undefined;
    if (typeof sealed !== 'string') throw new SealError(ERROR_CODES.sealRequired, { purpose: 'result' });
    const { value, place } = this.keyring.openPlaced(sealed, 'result');
    const mismatch = [
      ...(place.key === key ? [] : ['key']),
      ...(place.operation === '' || place.operation === operation ? [] : ['operation']),
      ...((place.field ?? '') === '' ? [] : ['field']),
    ];
    if (mismatch.length > 0)
      throw new SealError(ERROR_CODES.sealMisplaced, { keyId: null, purpose: 'result', mismatch });
    return value;
  }

  /** Whether results are sealed (and opened when read). */
  get seals(): boolean {
    return this.keyring !== undefined;
  }

  /** An error as this ledger stores it, as JSON text: bounded, its message sealed for the key's row with a keyring. */
  errorJson(error: RecordedError, key: string): string {
    return JSON.stringify(boundError(this.sealedError(error, key)));
  }

  /** An error with a keyring and no seal of its own: its message sealed for the key's row. */
  private sealedError(error: RecordedError, key: string): RecordedError {
    if (!this.keyring || typeof error.sealed === 'string') return error;
    const message = String(error.message ?? '');
    const text = { name: error.name ?? 'Error', code: error.code, message, text: message };
    return {
      ...error,
      message: `sealed message, ${Buffer.byteLength(message)} bytes`,
      sealed: this.keyring.seal(text, { purpose: 'error', operation: '', key }),
    };
  }

  /** A result as JSON text (canonical), refused when Postgres cannot store it or it is over the limit. */
  encodeResult(result: unknown): string {
    const text = canonicalJson(result);
    if (text.includes('\\u0000') && JSON_NUL.test(text)) {
      // Refused here, for this result alone: in the batched completion it would fail every row.
      throw new SerializationError({
        path: '$',
        reason: 'a string contains a NUL character, which Postgres cannot store',
      });
    }
    const bytes = Buffer.byteLength(text);
    if (bytes > this.maxResultBytes) {
      throw new PayloadTooLargeError({ what: 'result', bytes, limit: this.maxResultBytes });
    }
    return text;
  }
}

/** An error cut to what a row keeps: its code, name and message bounded, its seal whole. */
export function boundError(error: RecordedError): RecordedError {
  // Cut, then made storable: a cut may split a surrogate pair.
  const code = storableText(
    typeof error.code === 'string' && error.code.length > 0 ? error.code.slice(0, 100) : 'UNKNOWN',
  );
  const message = storableText(String(error.message ?? '').slice(0, MAX_ERROR_MESSAGE_LENGTH));
  const out: RecordedError = { code, message };
  if (error.name) out.name = storableText(String(error.name).slice(0, 100));
  // Sealed text is base64url: storable as it is, and never cut (a cut seal cannot be opened).
  if (typeof error.sealed === 'string') out.sealed = error.sealed;
  return out;
}

/** A NUL character escaped in JSON text, not preceded by an escaped backslash. */
const JSON_NUL = /(?:^|[^\\])(?:\\\\)*\\u0000/;

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
