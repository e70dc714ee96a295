import { SealError } from '../errors/errors.js';
import { ERROR_CODES } from '../errors/idempotency-error.js';
import type { LedgerRecord } from '../ledger/types.js';
import { isSealed, type Keyring, sealedKeyId } from '../sealing/keyring.js';
import { openRecordedError } from '../sealing/sealed-error.js';
import { isSealedResult, SEALED_FIELD, type SealedResult, unseal } from '../sealing/sealed-result.js';
import { CliError, EXIT } from './errors.js';
import type { OpenedValues } from './render-record.js';

/** What opening a record gave: the values, which parts they are, and the keys that opened them. */
export type RecordOpening = {
  opened: OpenedValues;
  parts: ('result' | 'error')[];
  keyIds: string[];
};

/** The sealed string a stored result holds, if any. */
function sealedOfResult(result: unknown): string | undefined {
  if (isSealedResult(result)) return (result as Record<string, unknown>)[SEALED_FIELD] as string;
  return isSealed(result) ? result : undefined;
}

/**
 * Opens in memory every sealed part of `record` (its result, its error text). Nothing is shown
 * here: the caller audits the opening first. A part the keyring cannot open fails the whole
 * opening with the seal error's code (`IDEMPOTENCY_SEAL_KEY_UNKNOWN`, `IDEMPOTENCY_SEAL_INVALID`),
 * so an operator never sees half a record as if it were all of it.
 */
export function openRecord(record: LedgerRecord, keyring: Keyring): RecordOpening {
  const opening: RecordOpening = { opened: {}, parts: [], keyIds: [] };
  const use = (part: 'result' | 'error', sealed: string, open: () => void) => {
    try {
      open();
    } catch (err) {
      if (!(err instanceof SealError)) throw err;
      throw new CliError(EXIT.failure, sealFailure(err, part, record.key, keyring), err.code);
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

function sealFailure(err: SealError, part: string, key: string, keyring: Keyring): string {
  const where = `the sealed ${part} of ${key}`;
  const keyId = 'keyId' in err.details ? err.details.keyId : null;
  if (keyId !== null && !keyring.has(keyId)) {
    return (
      `cannot open ${where}: it is sealed with key ${keyId}, which BQI_KEYRING ` +
      `does not hold (it holds ${keyring.ids.join(', ')}); nothing was shown`
    );
  }
  if (err.code === ERROR_CODES.sealInvalid)
    return `cannot open ${where}: it is malformed or was altered; nothing was shown`;
  return `cannot open ${where}: ${err.message}; nothing was shown`;
}
