import crypto from 'node:crypto';

type HashOneShot = (algorithm: string, data: string, encoding: 'hex' | 'base64url') => string;
/** `crypto.hash` (Node 20.12+) hashes in one call without a Hash object; older Nodes take the long way. */
const oneShot = (crypto as unknown as { hash?: HashOneShot }).hash;

/** SHA-256 of a string's UTF-8 bytes. The same digest as `createHash('sha256').update(text)`. */
export const sha256: (text: string, encoding: 'hex' | 'base64url') => string = oneShot
  ? (text, encoding) => oneShot('sha256', text, encoding)
  : (text, encoding) => crypto.createHash('sha256').update(text).digest(encoding);
