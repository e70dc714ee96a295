import type { SealError } from '../errors/errors.js';
import { ERROR_CODES } from '../errors/idempotency-error.js';
import type { LedgerRecord } from '../ledger/types.js';
import type { Keyring } from '../sealing/keyring.js';
import { openRecordParts, type RecordOpening } from '../sealing/open-record.js';
import { CliError, EXIT } from './errors.js';

export type { RecordOpening } from '../sealing/open-record.js';

/**
 * Opens in memory every sealed part of `record` (see `openRecordParts`); a part the keyring
 * cannot open fails the whole opening with the seal error's code (`IDEMPOTENCY_SEAL_KEY_UNKNOWN`,
 * `IDEMPOTENCY_SEAL_INVALID`) and a message that says nothing was shown.
 */
export function openRecord(record: LedgerRecord, keyring: Keyring): RecordOpening {
  return openRecordParts(record, keyring, (err, part) => {
    throw new CliError(EXIT.failure, sealFailure(err, part, record.key, keyring), err.code);
  });
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
