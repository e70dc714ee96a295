import type { RecordedError } from '../ledger/types.js';
import { isSealed, sealedKeyId } from '../sealing/keyring.js';
import { isSealedResult, SEALED_FIELD } from '../sealing/sealed-result.js';
import { preview } from './format.js';

/** AES-GCM's IV and tag around the sealed bytes (see `Keyring.sealBytes`). */
const SEAL_OVERHEAD_BYTES = 12 + 16;

/** `sealed (key k1, 212 bytes)`: the key that opens it and the size of what it holds. */
export function sealedSummary(sealed: string): string {
  const keyId = sealedKeyId(sealed) ?? '?';
  const body = sealed.slice(sealed.lastIndexOf('.') + 1);
  const bytes = Math.max(0, Buffer.byteLength(body, 'base64url') - SEAL_OVERHEAD_BYTES);
  return `sealed (key ${keyId}, ${bytes} bytes)`;
}

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
