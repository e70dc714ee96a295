import { createHmac } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { HmacKeyring } from '../../src/redaction/hmac-keyring.js';

const SECRET = 'hmac-keyring-test-key-0123456789abcdef';

/** The digest as stored references were made: the domain, a NUL, then the data's UTF-8 bytes. */
function expected(domain: string, data: string): string {
  return createHmac('sha256', Buffer.from(SECRET)).update(domain).update('\0').update(data).digest('base64url');
}

describe('HmacKeyring digests', () => {
  const ring = new HmacKeyring([{ id: 'k1', secret: SECRET }]);

  it('digests a text as the HMAC of its domain, a NUL and its UTF-8 bytes, as a byte array of them', () => {
    fc.assert(
      fc.property(
        fc.constantFrom('identifier', 'credential_ref', 'content') as fc.Arbitrary<
          'identifier' | 'credential_ref' | 'content'
        >,
        fc.oneof(fc.string(), fc.string({ unit: 'grapheme' }), fc.constantFrom('', '\udc00x', 'x\ud800', 'é\u0000ü')),
        (domain, data) => {
          expect(ring.digest(domain, data)).toBe(expected(domain, data));
          expect(ring.digest(domain, Buffer.from(data))).toBe(expected(domain, data));
        },
      ),
      { numRuns: 500 },
    );
  });

  it('keeps references made from a text verifiable', () => {
    const ref = ring.identifierRef('customer-42');
    expect(ring.recognise(ref, 'hmac')).toBe('k1');
    expect(ring.verify(ref, 'customer-42', 'identifier')).toBe(true);
    expect(ring.verify(ring.opaqueRef('vault/db'), 'vault/db', 'credential_ref')).toBe(true);
  });
});
