import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import packageJson from '../../package.json' with { type: 'json' };

/**
 * The public surface stays small: the root holds what an application writes against (at most 40
 * runtime values: the runtime, operations, keyrings, the errors it catches), and every other part
 * is on a subpath with an entry of its own, each an explicit list of names.
 */
const MAX_ROOT_VALUES = 40;
const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** Each `exports` entry but package.json, with the source of its module. */
const entries = Object.entries(packageJson.exports)
  .filter((e): e is [string, { types: string; import: string; default: string }] => typeof e[1] !== 'string')
  .map(([path, target]) => ({
    path,
    source: `${ROOT}${target.import.replace(/^\.\/dist\//, '').replace(/\.js$/, '.ts')}`,
    target,
  }));

describe('the public surface', () => {
  it(`the root exports at most ${MAX_ROOT_VALUES} runtime values, the runtime among them`, async () => {
    const root = await import('../../src/index.js');
    const values = Object.keys(root);

    expect(values.length).toBeLessThanOrEqual(MAX_ROOT_VALUES);
    expect(values).toEqual(
      expect.arrayContaining(['createIdempotency', 'defineOperation', 'defineKeyring', 'unseal', 'withIdempotency']),
    );
    expect(values).not.toContain('PostgresLedger');
    expect(values).not.toContain('AuditStore');
  });

  it('each subpath has its own entry (types, import, default), explicit names only, and loads', async () => {
    expect(entries.map((e) => e.path)).toEqual([
      '.',
      './ledger',
      './audit',
      './redaction',
      './scanners',
      './observability',
      './ops',
      './testing',
    ]);
    for (const e of entries) {
      expect(e.target.types).toBe(e.target.import.replace(/\.js$/, '.d.ts'));
      expect(e.target.default).toBe(e.target.import);
      const text = readFileSync(e.source, 'utf8');
      expect(text, e.path).not.toMatch(/^export \* from/m);
      const loaded = await import(e.source);
      expect(Object.keys(loaded).length, e.path).toBeGreaterThan(0);
    }
  });

  it('no entry exports the unkeyed SHA-256 fingerprint: a digest of guessable input is no secret (keyedFingerprint is)', async () => {
    const unkeyed = (await import('../../src/fingerprint/fingerprint.js')).fingerprint;
    for (const e of entries) {
      const loaded: Record<string, unknown> = await import(e.source);
      expect(Object.keys(loaded), e.path).not.toContain('fingerprint');
      expect(Object.values(loaded), e.path).not.toContain(unkeyed);
    }
    expect(Object.keys(await import('../../src/entries/ledger.js'))).toContain('keyedFingerprint');
  });
});
