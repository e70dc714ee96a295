/**
 * IVs are drawn at the moment of sealing: two processes started from one V8 startup snapshot
 * (taken after the sealing code had already sealed once, as a warm-up or a self-check would)
 * seal the same plaintext under the same key with different IVs. Anything sealing kept in module
 * state (a pool of pre-drawn IVs) would be copied into both, and both would seal with its next IV.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { build } from 'esbuild';
import { afterAll, describe, expect, it } from 'vitest';

const run = promisify(execFile);
const dirs: string[] = [];
afterAll(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

/** The snapshot's entry: the sealing module, one seal before the snapshot, one seal per process after it. */
const ENTRY_TAIL = `
;
const SECRET = 'base64:9mJq1c2xv0yH8cKkQeVbq3yJ1tTzq2m8rVf3a6W7nYc=';
const place = { purpose: 'value', operation: 'op', key: 'k' };
// A seal before the snapshot: whatever sealing keeps in module state is in the snapshot now.
(() => sealing.defineKeyring({ keys: [{ id: 'k1', secret: SECRET }] }).seal('warm-up', place))();
// Garbage, so the warm-up keyring's key objects (which a snapshot cannot hold) are collected.
for (let i = 0, a; i < 2e6; i++) a = { i, s: 'x' + i, b: new Array(8) };
require('v8').startupSnapshot.setDeserializeMainFunction(() => {
  const ring = sealing.defineKeyring({ keys: [{ id: 'k1', secret: SECRET }] });
  process.stdout.write(ring.seal('the same plaintext', place));
});
`;

describe('IVs under startup snapshots', () => {
  it('two processes from one startup snapshot seal the same plaintext with different IVs', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'seal-snapshot-'));
    dirs.push(dir);
    await build({
      entryPoints: [new URL('../../src/sealing/keyring.ts', import.meta.url).pathname],
      bundle: true,
      platform: 'node',
      format: 'iife',
      globalName: 'sealing',
      outfile: join(dir, 'sealing.js'),
      logLevel: 'error',
    });
    const entry = join(dir, 'entry.js');
    await writeFile(entry, (await readFile(join(dir, 'sealing.js'), 'utf8')) + ENTRY_TAIL);
    const blob = join(dir, 'snapshot.blob');
    await run(process.execPath, ['--snapshot-blob', blob, '--build-snapshot', entry], { cwd: dir });
    const sealed = await Promise.all(
      [1, 2, 3].map(async () => (await run(process.execPath, ['--snapshot-blob', blob], { cwd: dir })).stdout),
    );
    const ivs = sealed.map((s) =>
      Buffer.from(s.slice(s.lastIndexOf('.') + 1), 'base64url')
        .subarray(0, 12)
        .toString('hex'),
    );
    expect(sealed.every((s) => s.startsWith('bqs'))).toBe(true);
    expect(new Set(ivs).size).toBe(3);
    expect(new Set(sealed).size).toBe(3);
  }, 60_000);
});
