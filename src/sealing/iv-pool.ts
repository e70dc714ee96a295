import { randomFillSync } from 'node:crypto';

const IV_BYTES = 12;
const POOL_IVS = 512;
let pool = Buffer.alloc(0);
let offset = 0;

/**
 * A fresh random 96-bit IV for AES-GCM. Drawn from a pool refilled 6 KiB at a time: one call to
 * the CSPRNG per 512 seals instead of one per seal. Each IV is copied out, so a caller that keeps
 * it never sees the pool change. Random IVs under one key are safe for far more than 2^32 seals.
 */
export function nextIv(): Buffer {
  if (offset + IV_BYTES > pool.length) {
    pool = randomFillSync(Buffer.allocUnsafe(IV_BYTES * POOL_IVS));
    offset = 0;
  }
  const iv = Buffer.from(pool.subarray(offset, offset + IV_BYTES));
  offset += IV_BYTES;
  return iv;
}
