/**
 * The sealed text and the keys behind it: one canonical text per sealed value, values sealed
 * before seals named their place refused by name, weak keys refused with what to use instead,
 * and each key's seals counted against its budget.
 */
import { createCipheriv, hkdfSync, randomBytes } from 'node:crypto';
import { serialize } from 'node:v8';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { PostgresLedger } from '../../src/ledger/postgres-ledger.js';
import { defineKeyring, parseKeyringSpec } from '../../src/sealing/keyring.js';
import { openRecordedError } from '../../src/sealing/sealed-error.js';
import { unseal } from '../../src/sealing/sealed-result.js';
import { type SealPlace, sealedPlace } from '../../src/sealing/sealed-text.js';
import { TestContext } from '../helpers/context.js';

const secret = randomBytes(32);
const ring = defineKeyring({ keys: [{ id: 'k1', secret }] });
const AT: SealPlace = { purpose: 'result', operation: 'op', key: 'acme/op:r:1:v1' };

function failure(fn: () => unknown): { code?: string | undefined; message: string } | undefined {
  try {
    fn();
  } catch (err) {
    return { code: (err as { code?: string }).code, message: (err as Error).message };
  }
  return undefined;
}

/** A value sealed as it was before seals named their place: AES-GCM under the same subkey, the purpose alone as associated data. */
function unboundSeal(value: unknown, purpose: string): string {
  const key = Buffer.from(hkdfSync('sha256', secret, 'bullmq-idempotency/keyring/v1', 'seal', 32));
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  cipher.setAAD(Buffer.from(purpose));
  const body = Buffer.concat([iv, cipher.update(serialize(value)), cipher.final(), cipher.getAuthTag()]);
  return `bqs1.k1.${body.toString('base64url')}`;
}

describe('sealed text is canonical', () => {
  it('exactly one text opens: whitespace, junk, padding or stray bits anywhere are refused', () => {
    const sealed = ring.seal({ v: 1 }, AT);
    expect(ring.open(sealed, AT)).toEqual({ v: 1 });
    expect(sealedPlace(sealed)).toEqual({ ...AT, field: '' });
    const body = sealed.lastIndexOf('.') + 1;
    const place = sealed.indexOf('.', 'bqs2.k1.'.length);
    const variants = [
      `${sealed.slice(0, body + 8)} ${sealed.slice(body + 8)}`, // a space inside the body
      `${sealed.slice(0, body + 8)}\n${sealed.slice(body + 8)}`, // a line break
      `${sealed.slice(0, body + 8)}!${sealed.slice(body + 8)}`, // a junk character
      `${sealed}=`, // padding
      `${sealed} `, // trailing whitespace
      ` ${sealed}`,
      `${sealed.slice(0, place)}=${sealed.slice(place)}`, // padding in the place
      `${sealed.slice(0, body)}${sealed.slice(body).replaceAll('-', '+').replaceAll('_', '/')}`, // the other alphabet
      `${sealed}.`, // an extra part
      sealed.slice(0, 'bqs2.k1.'.length) + sealed.slice(body), // no place
    ];
    // Stray bits: the last character of an unpadded base64url text carries bits that must be zero.
    const last = sealed.at(-1) as string;
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
    const rem = (sealed.length - body) % 4;
    if (rem !== 0) {
      const stray = alphabet[alphabet.indexOf(last) + 1] as string;
      variants.push(`${sealed.slice(0, -1)}${stray}`);
    }
    for (const v of variants) {
      if (v === sealed) continue;
      expect(failure(() => ring.open(v, AT))?.code, JSON.stringify(v)).toBe('IDEMPOTENCY_SEAL_INVALID');
    }
  });
});

describe('values sealed before seals named their place', () => {
  it('are recognised and refused by name, with where to read what to do, never opened', () => {
    const old = unboundSeal({ chargeId: 'ch_1' }, 'result');
    const got = failure(() => unseal(old, ring));
    expect(got?.code).toBe('IDEMPOTENCY_SEAL_UNBOUND');
    expect(got?.message).toContain('docs/sealing-keys.md');
    expect(failure(() => unseal({ chargeId: 'ch_1', $sealed: old } as never, ring))?.code).toBe(
      'IDEMPOTENCY_SEAL_UNBOUND',
    );
    expect(failure(() => ring.open(old, AT))?.code).toBe('IDEMPOTENCY_SEAL_UNBOUND');
    const error = { code: 'E', message: 'sealed message, 3 bytes', sealed: unboundSeal({ text: 'x' }, 'error') };
    expect(failure(() => openRecordedError(error, ring))?.code).toBe('IDEMPOTENCY_SEAL_UNBOUND');
  });

  it('error text in clear where the seal belongs is refused', () => {
    const error = { code: 'E', message: 'm', sealed: 'the whole text, in clear' };
    expect(failure(() => openRecordedError(error, ring))?.code).toBe('IDEMPOTENCY_SEAL_REQUIRED');
  });
});

describe('weak keys', () => {
  it.each([
    ['a dictionary phrase', 'acme-corp-production-signing-key'],
    ['a passphrase of common words', 'correct horse battery staple and more words'],
    ['an alphabet run', 'abcdefghijklmnopqrstuvwxyz012345'],
    ['a keyboard walk', 'qwertyuiopasdfghjklzxcvbnm1234567890'],
    ['a repeated pattern', 'Xk9!Xk9!Xk9!Xk9!Xk9!Xk9!Xk9!Xk9!'],
  ])('%s is refused, with what to generate instead', (_what, text) => {
    const direct = failure(() => defineKeyring({ keys: [{ id: 'k1', secret: text }] }));
    const spec = failure(() => parseKeyringSpec(`k1:${text}`));
    for (const got of [direct, spec]) {
      expect(got?.code).toBe('IDEMPOTENCY_CONFIG');
      expect(got?.message).toContain('k1 is too weak');
      expect(got?.message).toContain('openssl rand -base64 32');
      expect(got?.message).not.toContain(text);
    }
  });

  it('random bytes given as base64: or hex:, or pasted as their base64 text, pass', () => {
    for (let i = 0; i < 20; i++) {
      const k = randomBytes(32);
      for (const s of [`base64:${k.toString('base64')}`, `hex:${k.toString('hex')}`, k.toString('base64'), k]) {
        expect(defineKeyring({ keys: [{ id: 'k1', secret: s }] }).currentId).toBe('k1');
      }
    }
  });
});

describe('the budget of a key', () => {
  it('counts seals per key and warns once, with a code, when a process passes sealWarnAt', async () => {
    const k = defineKeyring({ keys: [{ id: 'k9', secret: randomBytes(32) }], sealWarnAt: 3 });
    const warnings: { code?: string; message: string }[] = [];
    const listen = (w: Error & { code?: string }) => {
      if (w.code === 'IDEMPOTENCY_SEAL_BUDGET') warnings.push({ code: w.code, message: w.message });
    };
    process.on('warning', listen);
    try {
      for (let i = 0; i < 6; i++) k.seal(i, AT);
      await new Promise((r) => setImmediate(r)); // warnings are emitted on the next tick
    } finally {
      process.off('warning', listen);
    }
    expect(k.sealCount()).toBe(6);
    expect(k.sealCount('k9')).toBe(6);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]?.message).toContain('2^32');
    expect(warnings[0]?.message).toContain('docs/sealing-keys.md');
  });
});

describe("the ledger's own sealing binds each value to its row", () => {
  const t = new TestContext('seal_format');
  let sealing: PostgresLedger;
  const claim = (resourceKey: string) => ({
    key: { namespace: 'acme/mail.send', resourceKey, version: 'v1' },
    operation: 'mail.send',
    fingerprint: 'f'.repeat(64),
    leaseMs: 5000,
    retentionMs: 3_600_000,
    downstream: 'idempotent' as const,
  });
  beforeAll(async () => {
    await t.setup();
    sealing = t.ledger({ keyring: ring });
  });
  afterAll(async () => {
    await sealing.close();
    await t.teardown();
  });

  it("a result copied into another key's row, or a result in clear, is refused on replay and by get", async () => {
    const keys: string[] = [];
    for (const r of ['a', 'b', 'c']) {
      const c = await sealing.claim(claim(r));
      if (c.kind !== 'acquired') throw new Error(c.kind);
      await sealing.complete(c.key, c.epoch, { to: `${r}@example.com` });
      keys.push(c.key);
    }
    const table = `${t.schema}.idempotency_ledger`;
    await t.query(`update ${table} set result = (select result from ${table} where key = $1) where key = $2`, [
      keys[0],
      keys[1],
    ]);
    await t.query(`update ${table} set result = '{"to": "c@example.com"}' where key = $1`, [keys[2]]);
    expect(await sealing.claim(claim('a'))).toMatchObject({ kind: 'completed', result: { to: 'a@example.com' } });
    await expect(sealing.claim(claim('b'))).rejects.toMatchObject({ code: 'IDEMPOTENCY_SEAL_MISPLACED' });
    await expect(sealing.get(keys[1] as string)).rejects.toMatchObject({ code: 'IDEMPOTENCY_SEAL_MISPLACED' });
    await expect(sealing.claim(claim('c'))).rejects.toMatchObject({ code: 'IDEMPOTENCY_SEAL_REQUIRED' });
  });
});
