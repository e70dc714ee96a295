/** What a Blob (or a File) shows without being read. */
export type BlobLike = { size: number; type: string; arrayBuffer: () => unknown };

/** A `Blob`, a `File` or an object shaped like one (`size`, `type`, `arrayBuffer()`). */
export function isBlobLike(value: object): value is BlobLike {
  const v = value as Partial<BlobLike>;
  return typeof v.size === 'number' && typeof v.type === 'string' && typeof v.arrayBuffer === 'function';
}

/**
 * True for raw bytes in any container: `Buffer` and every other typed array, `DataView`,
 * `ArrayBuffer`, `SharedArrayBuffer`, and Blob-likes. None of them is walked key by key (a
 * `Float64Array` would otherwise come out as `{ "0": …, "1": … }`, its bytes in clear).
 */
export function isBinary(value: object): boolean {
  return (
    ArrayBuffer.isView(value) ||
    value instanceof ArrayBuffer ||
    (typeof SharedArrayBuffer === 'function' && value instanceof SharedArrayBuffer) ||
    isBlobLike(value)
  );
}

/** The bytes of a binary container, without copying; undefined for a Blob, which cannot be read synchronously. */
export function bytesOf(value: object): Uint8Array | undefined {
  if (value instanceof Uint8Array) return value;
  if (ArrayBuffer.isView(value)) return new Uint8Array(value.buffer, value.byteOffset, value.byteLength);
  if (value instanceof ArrayBuffer) return new Uint8Array(value);
  if (typeof SharedArrayBuffer === 'function' && value instanceof SharedArrayBuffer) return new Uint8Array(value);
  return undefined;
}
