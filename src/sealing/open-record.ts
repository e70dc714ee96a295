import { SealError } from '../errors/errors.js';
import type { LedgerRecord } from '../ledger/types.js';
import type { Keyring } from './keyring.js';
import { openRecordedError, type SealedErrorText } from './sealed-error.js';
import { isSealedResult, SEALED_FIELD, type SealedResult, unseal } from './sealed-result.js';
import { isSealed, sealedKeyId } from './sealed-text.js';

/** What opening a record's sealed parts gave (absent: it was not sealed, or not there). */
export type OpenedValues = {
  /** The exact value the processor returned (or the operator resolved). */
  result?: { value: unknown };
  /** The whole text of the recorded error. */
  error?: SealedErrorText;
};

/** What opening a record gave: the values, which parts they are, and the keys that opened them. */
export type RecordOpening = {
  opened: OpenedValues;
  parts: ('result' | 'error')[];
  keyIds: string[];
};

/** The sealed string a stored result holds, if any. */
export function sealedOfResult(result: unknown): string | undefined {
  if (isSealedResult(result)) return (result as Record<string, unknown>)[SEALED_FIELD] as string;
  return isSealed(result) ? result : undefined;
}

/**
 * Opens in memory every sealed part of `record` (its result, its error text). Nothing is shown
 * here: the caller audits the opening first. A part the keyring cannot open fails the whole
 * opening (`onFailure` receives the seal error and the part; by default the error is thrown), so
 * an operator never sees half a record as if it were all of it.
 */
export function openRecordParts(
  record: LedgerRecord,
  keyring: Keyring,
  onFailure: (err: SealError, part: 'result' | 'error') => never = (err) => {
    throw err;
  },
): RecordOpening {
  const opening: RecordOpening = { opened: {}, parts: [], keyIds: [] };
  const use = (part: 'result' | 'error', sealed: string, open: () => void) => {
    try {
      open();
    } catch (err) {
      if (!(err instanceof SealError)) throw err;
      onFailure(err, part);
    }
    opening.parts.push(part);
    const keyId = sealedKeyId(sealed);
    if (keyId && !opening.keyIds.includes(keyId)) opening.keyIds.push(keyId);
  };
  const sealedResult = sealedOfResult(record.result);
  if (sealedResult !== undefined) {
    use('result', sealedResult, () => {
      opening.opened.result = {
        value: unseal(record.result as SealedResult<unknown>, keyring, {
          operation: record.operation,
          key: record.key,
        }),
      };
    });
  }
  const error = record.error;
  if (error?.sealed !== undefined) {
    use('error', error.sealed, () => {
      const text = openRecordedError(error, keyring, { operation: record.operation, key: record.key });
      if (text) opening.opened.error = text;
    });
  }
  return opening;
}

/** AES-GCM's IV and tag around the sealed bytes (see `Keyring.sealBytes`). */
const SEAL_OVERHEAD_BYTES = 12 + 16;

/** `sealed (key k1, 212 bytes)`: the key that opens it and the size of what it holds. */
export function sealedSummary(sealed: string): string {
  const keyId = sealedKeyId(sealed) ?? '?';
  const body = sealed.slice(sealed.lastIndexOf('.') + 1);
  const bytes = Math.max(0, Buffer.byteLength(body, 'base64url') - SEAL_OVERHEAD_BYTES);
  return `sealed (key ${keyId}, ${bytes} bytes)`;
}
