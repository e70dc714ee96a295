import { randomBytes } from 'node:crypto';
import { inspect } from 'node:util';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { fingerprint } from '../../src/fingerprint/fingerprint.js';
import { fingerprintKeyId, keyedFingerprint } from '../../src/fingerprint/keyed-fingerprint.js';
import { defineKeyring, parseKeyringSpec } from '../../src/sealing/keyring.js';
import { sealResult, unseal } from '../../src/sealing/sealed-result.js';
import { isSealed, type SealPlace } from '../../src/sealing/sealed-text.js';
import { codeOf } from '../helpers/code-of.js';
import { medianCpuMs } from '../helpers/cpu-time.js';

const secret = () => randomBytes(32);
/** Where the values of these tests are sealed: a result of operation `op`, key `k`. */
const AT = { purpose: 'result', operation: 'op', key: 'k' } as const;
const ROW = { operation: 'op', key: 'k' };

describe('keyring', () => {
  it('refuses weak secrets: short, few distinct bytes, a repeated block, a constant step', () => {
    const weak = [
      Buffer.alloc(31, 7).fill(randomBytes(31)), // 31 bytes
      Buffer.alloc(32, 'a'),
      Buffer.from('0101010101010101010101010101010101010101'),
      Buffer.from('hunter2!hunter2!hunter2!hunter2!'),
      Buffer.from(Array.from({ length: 32 }, (_, i) => i)),
      Buffer.from(Array.from({ length: 40 }, (_, i) => (200 + 3 * i) % 256)),
      'password-password-password-password',
      'hex:00',
      'base64:c2hvcnQ=',
    ];
    for (const s of weak) {
      expect(
        codeOf(() => defineKeyring({ keys: [{ id: 'k1', secret: s }] })),
        String(s),
      ).toBe('IDEMPOTENCY_CONFIG');
    }
    // A random 32-byte key, and the hex and base64 forms of one, are fine.
    const k = secret();
    for (const s of [k, `hex:${k.toString('hex')}`, `base64:${k.toString('base64')}`]) {
      expect(defineKeyring({ keys: [{ id: 'k1', secret: s }] }).currentId).toBe('k1');
    }
  });

  it('refuses no keys, a malformed or repeated id, and an unknown current key', () => {
    expect(codeOf(() => defineKeyring({ keys: [] }))).toBe('IDEMPOTENCY_CONFIG');
    expect(codeOf(() => defineKeyring({ keys: [{ id: 'a.b', secret: secret() }] }))).toBe('IDEMPOTENCY_CONFIG');
    expect(
      codeOf(() =>
        defineKeyring({
          keys: [
            { id: 'k1', secret: secret() },
            { id: 'k1', secret: secret() },
          ],
        }),
      ),
    ).toBe('IDEMPOTENCY_CONFIG');
    expect(codeOf(() => defineKeyring({ keys: [{ id: 'k1', secret: secret() }], current: 'k9' }))).toBe(
      'IDEMPOTENCY_CONFIG',
    );
  });

  it('never shows key material: JSON, util.inspect and the error of a weak key name ids only', () => {
    const k = secret();
    const ring = defineKeyring({ keys: [{ id: 'k1', secret: k }] });
    const shown = `${JSON.stringify(ring)}\n${inspect(ring, { showHidden: true, depth: 5 })}`;
    expect(shown).toContain('k1');
    for (const form of [k.toString('hex'), k.toString('base64'), k.toString('base64url').slice(0, 20)]) {
      expect(shown).not.toContain(form);
    }
    let message = '';
    try {
      defineKeyring({ keys: [{ id: 'k1', secret: 'hunter2!hunter2!hunter2!hunter2!' }] });
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message).toMatch(/k1 is too weak/);
    expect(message).not.toContain('hunter2');
  });

  it('seals and opens exactly: Buffers, typed arrays, Dates, Maps, BigInt, -0, undefined, unicode', () => {
    const ring = defineKeyring({ keys: [{ id: 'k1', secret: secret() }] });
    const value = {
      token: `sk_${randomBytes(16).toString('hex')}`,
      bytes: Buffer.from([0, 255, 1]),
      u8: new Uint8Array([9, 8]),
      at: new Date('2026-12-01T10:00:00.123Z'),
      map: new Map([['a', 1]]),
      big: 12345678901234567890n,
      negZero: -0,
      missing: undefined,
      text: 'Grüße 😀 \u0000 \u202e',
      nested: [{ deep: [[{ x: 1 }]] }],
    };
    const sealed = ring.seal(value, AT);
    expect(isSealed(sealed)).toBe(true);
    expect(sealed).not.toContain(value.token);
    const back = ring.open<typeof value>(sealed, AT);
    expect(back).toStrictEqual(value);
    expect(Buffer.isBuffer(back.bytes)).toBe(true);
    expect(Object.is(back.negZero, -0)).toBe(true);
    expect(Object.hasOwn(back, 'missing')).toBe(true);
    // A fresh IV each time: equal values do not give equal ciphertexts.
    expect(ring.seal(value, AT)).not.toBe(sealed);
  });

  it('property: any JSON value, sealed and opened, is deep-equal to itself', () => {
    const ring = defineKeyring({ keys: [{ id: 'k1', secret: secret() }] });
    fc.assert(
      fc.property(fc.jsonValue(), (v) => {
        expect(ring.open(ring.seal(v, { ...AT, purpose: 'value' }), { ...AT, purpose: 'value' })).toStrictEqual(v);
      }),
      { numRuns: 300 },
    );
  });

  it('rotation: a value sealed with k1 opens with [k2, k1]; new values are sealed with k2', () => {
    const k1 = secret();
    const old = defineKeyring({ keys: [{ id: 'k1', secret: k1 }] });
    const sealed = old.seal({ a: 1 }, AT);
    const rotated = defineKeyring({
      keys: [
        { id: 'k2', secret: secret() },
        { id: 'k1', secret: k1 },
      ],
    });
    expect(rotated.open(sealed, AT)).toEqual({ a: 1 });
    expect(rotated.seal({ a: 2 }, AT)).toMatch(/^bqs2\.k2\./);
    expect(rotated.ids).toEqual(['k2', 'k1']);
  });

  it('a removed key, another keyring, a changed byte, a cut value or another place: a SealError, never garbage', () => {
    const ring = defineKeyring({ keys: [{ id: 'k1', secret: secret() }] });
    const sealed = ring.seal({ secret: 'x' }, AT);
    const other = defineKeyring({ keys: [{ id: 'k2', secret: secret() }] });
    expect(codeOf(() => other.open(sealed, AT))).toBe('IDEMPOTENCY_SEAL_KEY_UNKNOWN');
    const impostor = defineKeyring({ keys: [{ id: 'k1', secret: secret() }] });
    expect(codeOf(() => impostor.open(sealed, AT))).toBe('IDEMPOTENCY_SEAL_INVALID');
    const at = sealed.lastIndexOf('.') + 1;
    const flipped = `${sealed.slice(0, at + 10)}${sealed[at + 10] === 'A' ? 'B' : 'A'}${sealed.slice(at + 11)}`;
    expect(codeOf(() => ring.open(flipped, AT))).toBe('IDEMPOTENCY_SEAL_INVALID');
    expect(codeOf(() => ring.open(sealed.slice(0, -4), AT))).toBe('IDEMPOTENCY_SEAL_INVALID');
    expect(codeOf(() => ring.open('bqs2.k1.', AT))).toBe('IDEMPOTENCY_SEAL_INVALID');
    expect(codeOf(() => ring.open('not sealed', AT))).toBe('IDEMPOTENCY_SEAL_INVALID');
    expect(codeOf(() => ring.open(sealed, { ...AT, purpose: 'error' }))).toBe('IDEMPOTENCY_SEAL_MISPLACED');
  });

  it('opened at another place, a seal is refused naming its key id, its purpose and every part that differs', () => {
    const ring = defineKeyring({ keys: [{ id: 'k1', secret: secret() }] });
    const place: SealPlace = { purpose: 'input', operation: 'op', field: 'card', key: 'k' };
    const sealed = ring.seal('4111', place);
    const bytes = ring.sealBytes(Buffer.from('x'), place);
    const cases: [Partial<SealPlace>, string[]][] = [
      [{ operation: 'other' }, ['operation']],
      [{ key: 'other' }, ['key']],
      [{ field: 'pin' }, ['field']],
      [{ operation: 'other', field: '', key: 'other' }, ['operation', 'field', 'key']],
    ];
    for (const [change, mismatch] of cases) {
      const at = { ...place, ...change };
      for (const open of [() => ring.open(sealed, at), () => ring.openBytes(bytes, at)]) {
        let thrown: unknown;
        try {
          open();
        } catch (err) {
          thrown = err;
        }
        expect(thrown).toMatchObject({
          code: 'IDEMPOTENCY_SEAL_MISPLACED',
          details: { keyId: 'k1', purpose: 'input', mismatch },
        });
      }
    }
    expect(ring.open(sealed, place)).toBe('4111');
    expect(ring.openBytes(bytes, place).toString()).toBe('x');
    // A whole value's place has no field: absent and empty are the same place.
    const whole = ring.seal(1, AT);
    expect(ring.open(whole, { ...AT, field: '' })).toBe(1);
  });

  it('a value that cannot be copied (a function, a symbol) is refused with a stable code', () => {
    const ring = defineKeyring({ keys: [{ id: 'k1', secret: secret() }] });
    expect(codeOf(() => ring.seal({ f: () => 1 }, AT))).toBe('IDEMPOTENCY_NOT_SERIALIZABLE');
    expect(codeOf(() => ring.seal({ s: Symbol('x') }, AT))).toBe('IDEMPOTENCY_NOT_SERIALIZABLE');
  });

  it('parses a keyring spec, current key first, and refuses a malformed one', () => {
    const a = secret().toString('base64');
    const b = secret().toString('hex');
    const ring = parseKeyringSpec(`k2:base64:${a}, k1:hex:${b}`);
    expect(ring.ids).toEqual(['k2', 'k1']);
    expect(codeOf(() => parseKeyringSpec('nocolon'))).toBe('IDEMPOTENCY_CONFIG');
    expect(codeOf(() => parseKeyringSpec(''))).toBe('IDEMPOTENCY_CONFIG');
  });
});

describe('sealed results', () => {
  const ring = defineKeyring({ keys: [{ id: 'k1', secret: secret() }] });

  it('keeps the declared public fields in clear, the rest only sealed; unseal gives back the exact value', () => {
    const value = { assetId: 'a_1', status: 'created', apiKey: `key_${randomBytes(12).toString('hex')}` };
    const view = sealResult(value, ['assetId', 'status'], ring, ROW);
    expect(view).toMatchObject({ assetId: 'a_1', status: 'created' });
    expect(Object.keys(view).sort()).toEqual(['$sealed', 'assetId', 'status']);
    expect(JSON.stringify(view)).not.toContain(value.apiKey);
    expect(unseal(view, ring)).toStrictEqual(value);
    expect(unseal(view.$sealed, ring)).toStrictEqual(value);
  });

  it('fails closed: without a declaration, or for a result that is not an object, nothing is in clear', () => {
    expect(Object.keys(sealResult({ assetId: 'a_1' }, [], ring, ROW))).toEqual(['$sealed']);
    expect(Object.keys(sealResult('a string', ['assetId'], ring, ROW))).toEqual(['$sealed']);
    expect(Object.keys(sealResult(['assetId'], ['assetId'], ring, ROW))).toEqual(['$sealed']);
    expect(codeOf(() => unseal({ assetId: 'a_1' } as never, ring))).toBe('IDEMPOTENCY_SEAL_INVALID');
  });

  it('a public field must be JSON: what JSON would change is refused before anything is recorded', () => {
    expect(codeOf(() => sealResult({ id: 10n }, ['id'], ring, ROW))).toBe('IDEMPOTENCY_NOT_SERIALIZABLE');
  });

  it('sealing a 1 MiB result costs a few JSON round trips of it, not a stall (CPU time, medians)', () => {
    const big = () => ({ blob: randomBytes(512 * 1024).toString('hex') });
    // The reference: what any recording of the result costs anyway (serialise, copy, parse).
    const reference = (v: { blob: string }) => JSON.parse(Buffer.from(JSON.stringify(v)).toString());
    const seal = (v: { blob: string }) => unseal(sealResult(v, [], ring, ROW), ring);
    reference(big());
    seal(big());
    let best = Number.POSITIVE_INFINITY;
    for (let attempt = 0; attempt < 3 && best >= 8; attempt++) {
      best = Math.min(best, medianCpuMs(big, seal) / Math.max(medianCpuMs(big, reference), 0.1));
    }
    // About 1 here; a key derivation per seal (scrypt, ~100 ms) would be well above 10.
    expect(best).toBeLessThan(8);
  });
});

describe('keyed fingerprints', () => {
  it('carry their key id; another key gives another fingerprint; the same key the same one', () => {
    const k1 = defineKeyring({ keys: [{ id: 'k1', secret: secret() }] });
    const k2 = defineKeyring({ keys: [{ id: 'k2', secret: secret() }] });
    const a = keyedFingerprint(k1, 'op', { amount: 5, to: 'x' });
    expect(fingerprintKeyId(a)).toBe('k1');
    expect(keyedFingerprint(k1, 'op', { to: 'x', amount: 5 })).toBe(a);
    expect(keyedFingerprint(k2, 'op', { amount: 5, to: 'x' })).not.toBe(a.replace('k1', 'k2'));
    expect(keyedFingerprint(k1, 'op', { amount: 6, to: 'x' })).not.toBe(a);
    expect(fingerprintKeyId('0'.repeat(64))).toBeUndefined();
  });

  it('a low-entropy input cannot be found by trying every value without the key', () => {
    const ring = defineKeyring({ keys: [{ id: 'k1', secret: secret() }] });
    const pin = String(Math.floor(Math.random() * 10_000)).padStart(4, '0');
    const stored = keyedFingerprint(ring, 'cards.unlock', { pin });
    const digest = stored.slice('fp1:k1:'.length);
    const guesses = new Set<string>();
    for (let i = 0; i < 10_000; i++) {
      const guess = String(i).padStart(4, '0');
      guesses.add(fingerprint('cards.unlock', { pin: guess }));
      guesses.add(Buffer.from(fingerprint('cards.unlock', { pin: guess }), 'hex').toString('base64url'));
    }
    expect(guesses.has(digest)).toBe(false);
    // With the key, the same input is recognised (the comparison the ledger makes still works).
    expect(keyedFingerprint(ring, 'cards.unlock', { pin })).toBe(stored);
  });
});
