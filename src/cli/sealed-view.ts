import type { RecordedError } from '../ledger/types.js';
import { sealedSummary } from '../sealing/open-record.js';
import { isSealedResult, SEALED_FIELD } from '../sealing/sealed-result.js';
import { isSealed } from '../sealing/sealed-text.js';
import { preview } from './format.js';

export { sealedSummary };

/** A copy of `value` in which every sealed string reads `<sealed (key k1, N bytes)>`. */
function maskSealed(value: unknown): unknown {
  if (isSealed(value)) return `<${sealedSummary(value)}>`;
  if (Array.isArray(value)) return value.map(maskSealed);
  if (typeof value === 'object' && value !== null && !(value instanceof Date)) {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, maskSealed(v)]));
  }
  return value;
}

/**
 * A ledger result as `inspect` shows it: the public fields in clear, the sealed whole as its
 * summary (`{"chargeId":"ch_1"} + sealed (key k1, 212 bytes)`). A result recorded before
 * sealing is shown as it is.
 */
export function resultLine(result: unknown): string {
  if (isSealedResult(result)) {
    const { [SEALED_FIELD]: sealed, ...clear } = result as Record<string, unknown>;
    const summary = sealedSummary(sealed as string);
    return Object.keys(clear).length > 0 ? `${preview(maskSealed(clear))} + ${summary}` : summary;
  }
  if (isSealed(result)) return sealedSummary(result);
  return preview(maskSealed(result));
}

/**
 * A recorded error as `inspect` shows it: `CARD_DECLINED (TerminalError): sealed message, 31 bytes`,
 * then where the whole text is (`text sealed (key k1, 840 bytes)`).
 */
export function errorLine(error: RecordedError): string {
  const head = !error.name || error.name === error.code ? error.code : `${error.code} (${error.name})`;
  const text = error.sealed ? `; text ${isSealed(error.sealed) ? sealedSummary(error.sealed) : 'sealed'}` : '';
  return `${head}: ${error.message}${text}`;
}
