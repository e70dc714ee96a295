/**
 * One parser of keyring specs (`parseKeyringSpec`), used by `BQI_KEYRING`, the CLI, the operations
 * process and `loadKeyring`: each malformed spec is refused under `IDEMPOTENCY_CONFIG` with a
 * message that names its real problem (and never the secret), and `details.problem` for programs.
 */
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { loadCliConfig } from '../../src/config/env.js';
import { ConfigError } from '../../src/config/errors.js';
import { isIdempotencyError } from '../../src/errors/idempotency-error.js';
import { defineKeyring, loadKeyring, parseKeyringSpec } from '../../src/sealing/keyring.js';

const b64 = () => randomBytes(32).toString('base64');

/** The code, problem and message of what `fn` throws. */
function refusal(fn: () => unknown): { code: string; problem: unknown; message: string } {
  try {
    fn();
  } catch (err) {
    if (!isIdempotencyError(err)) throw err;
    return { code: err.code, problem: (err.details as { problem?: unknown }).problem, message: err.message };
  }
  throw new Error('not refused');
}

describe('parseKeyringSpec: each malformed spec has its own message, all under one code', () => {
  const secret = b64();
  it.each<[what: string, spec: string, problem: string, says: string]>([
    ['empty', '', 'empty', 'is empty (expected id:base64:…'],
    ['only commas', ' , ,', 'empty', 'is empty'],
    ['no colon', 'justonepart', 'not_a_pair', 'entry 1 is not id:secret'],
    ['base64:… without an id', `base64:${secret}`, 'no_key_id', 'entry 1 has no key id: the form is id:base64:…'],
    ['hex:… without an id', `k1:base64:${secret},hex:${'ab'.repeat(32)}`, 'no_key_id', 'entry 2 has no key id'],
    ['an empty id', `:base64:${secret}`, 'no_key_id', 'entry 1 has no key id'],
    ['a malformed id', `k 1:base64:${secret}`, 'bad_key_id', 'entry 1: a key id is 1–32 of A–Z a–z 0–9 _ -'],
    [
      'a repeated id',
      `k1:base64:${secret},k1:base64:${b64()}`,
      'duplicate_key_id',
      'key id k1 is listed twice (entries 1 and 2)',
    ],
    ['an empty secret', 'k1:base64:', 'empty_secret', 'key k1 has an empty secret'],
    ['invalid base64', 'k1:base64:not*valid!base64', 'not_base64', 'key k1: its secret is not valid base64'],
    ['base64 of a wrong length', `k1:base64:${secret.slice(0, 41)}`, 'not_base64', 'is not valid base64'],
    ['invalid hex', 'k1:hex:xyz', 'not_hex', 'key k1: its secret is not valid hex'],
    [
      'a short key',
      `k1:base64:${randomBytes(6).toString('base64')}`,
      'too_weak',
      'key k1 is too weak: its secret is 6 bytes',
    ],
    ['a weak key', 'k1:hunter2hunter2hunter2hunter2hunter2', 'too_weak', 'key k1 is too weak: its secret uses only'],
  ])('%s', (_what, spec, problem, says) => {
    const r = refusal(() => parseKeyringSpec(spec));
    expect(r).toMatchObject({ code: 'IDEMPOTENCY_CONFIG', problem });
    expect(r.message).toContain(says);
    expect(r.message).not.toContain(secret);
  });

  it('accepts base64 of either alphabet, padded or not, and hex; the current key first', () => {
    const raw = randomBytes(32);
    const ring = parseKeyringSpec(
      ` k3:base64:${raw.toString('base64')} , k2:base64:${raw.toString('base64url')},k1:hex:${randomBytes(32).toString('hex')}`,
    );
    expect(ring.ids).toEqual(['k3', 'k2', 'k1']);
  });

  it('BQI_KEYRING reads the same parser: its message is the parser’s, under IDEMPOTENCY_ENV_CONFIG', () => {
    for (const [spec, says] of [
      [`base64:${b64()}`, 'BQI_KEYRING is not a usable keyring: entry 1 has no key id: the form is id:base64:…'],
      ['k1:base64:not*valid', 'BQI_KEYRING is not a usable keyring: key k1: its secret is not valid base64'],
    ] as const) {
      let thrown: unknown;
      try {
        loadCliConfig({ BQI_KEYRING: spec });
      } catch (err) {
        thrown = err;
      }
      expect(thrown).toBeInstanceOf(ConfigError);
      expect((thrown as ConfigError).code).toBe('IDEMPOTENCY_ENV_CONFIG');
      expect((thrown as ConfigError).message).toContain(says);
    }
  });

  it('loadKeyring takes a spec string from its source; defineKeyring refuses invalid base64 by name', async () => {
    expect((await loadKeyring(async () => `k9:base64:${b64()}`)).ids).toEqual(['k9']);
    await expect(loadKeyring(() => `base64:${b64()}`)).rejects.toMatchObject({ details: { problem: 'no_key_id' } });
    const r = refusal(() => defineKeyring({ keys: [{ id: 'k1', secret: 'base64:@@@@' }] }));
    expect(r).toMatchObject({ code: 'IDEMPOTENCY_CONFIG', problem: 'not_base64' });
    expect(r.message).not.toContain('too weak');
  });
});
