import { canonicalJson } from '../fingerprint/canonical-json.js';
import { bytesOf, isBinary, isBlobLike } from './binary-value.js';
import type { HmacKeyring } from './hmac-keyring.js';

/**
 * What is kept of content (a prompt, a conversation, an upload): its size, a keyed hash (equal
 * content gives equal hashes under one key, but nobody without the key can confirm a guess) and
 * its type (`text`, `object`, `array`, `binary`, or the MIME type of a data URL).
 */
export type ContentSummary = { bytes: number; hash: string; type: string };

const DATA_URL = /^data:([a-z0-9.+-]{1,40}\/[a-z0-9.+-]{1,80})[;,]/i;
const TYPE = /^[A-Za-z0-9.+/-]{1,128}$/;

/** JSON of anything, never throwing: BigInts become strings, cycles `[cycle]`, failures a tag. */
function fallbackJson(value: unknown): string {
  const seen = new WeakSet<object>();
  try {
    const json = JSON.stringify(value, (_k, v: unknown) => {
      if (typeof v === 'bigint') return v.toString();
      if (typeof v === 'object' && v !== null) {
        if (seen.has(v)) return '[cycle]';
        seen.add(v);
      }
      return v;
    });
    return json ?? String(value);
  } catch {
    return Object.prototype.toString.call(value);
  }
}

/**
 * Canonical JSON (RFC 8785) of a value, so that key order does not change an identifier's
 * reference; any stable rendering when the value is not plain JSON. Never throws.
 */
export function canonicalText(value: unknown): string {
  try {
    return canonicalJson(value);
  } catch {
    return fallbackJson(value);
  }
}

/**
 * JSON of content to hash. Plain `JSON.stringify` (native, several times faster than the
 * canonical form): content is hashed on the hot path, and the same content built by the same code
 * serialises the same way. Never throws.
 */
function contentText(value: unknown): string {
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return fallbackJson(value);
  }
}

/**
 * A binary container's summary. A Blob cannot be read synchronously: its hash covers its size
 * and type only (so it tells equal blobs apart from different sizes, not equal contents).
 */
function summariseBinary(value: object, keyring: HmacKeyring): ContentSummary {
  const bytes = bytesOf(value);
  if (bytes) return { bytes: bytes.byteLength, hash: keyring.contentHash(bytes), type: 'binary' };
  const blob = isBlobLike(value) ? value : { size: 0, type: '' };
  const type = TYPE.test(blob.type) && blob.type.includes('/') ? blob.type.toLowerCase() : 'binary';
  const size = Number.isSafeInteger(blob.size) && blob.size >= 0 ? blob.size : 0;
  return { bytes: size, hash: keyring.contentHash(`blob:${size}:${type}`), type };
}

/** The summary of `value`, hashed with the ring's current key. */
export function summariseContent(value: unknown, keyring: HmacKeyring): ContentSummary {
  if (typeof value === 'object' && value !== null && isBinary(value)) return summariseBinary(value, keyring);
  if (typeof value === 'string') {
    return {
      bytes: Buffer.byteLength(value, 'utf8'),
      hash: keyring.contentHash(value),
      type: DATA_URL.exec(value)?.[1]?.toLowerCase() ?? 'text',
    };
  }
  const text = contentText(value);
  const type = Array.isArray(value) ? 'array' : value === null ? 'null' : typeof value;
  return { bytes: Buffer.byteLength(text, 'utf8'), hash: keyring.contentHash(text), type };
}

/**
 * The key id of `value` when it is a summary this ring produced (so that redacting twice changes
 * nothing), else undefined.
 */
export function recogniseSummary(value: unknown, keyring: HmacKeyring): string | undefined {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined;
  const keys = Object.keys(value);
  if (keys.length !== 3) return undefined;
  const { bytes, hash, type } = value as Partial<Record<string, unknown>>;
  if (typeof bytes !== 'number' || !Number.isSafeInteger(bytes) || bytes < 0) return undefined;
  if (typeof type !== 'string' || !TYPE.test(type) || typeof hash !== 'string') return undefined;
  return keyring.recognise(hash, 'hmac');
}
