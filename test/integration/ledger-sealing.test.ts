import { afterAll, beforeAll, expect, it } from 'vitest';
import type { PostgresLedger } from '../../src/ledger/postgres-ledger.js';
import { openRecordedError } from '../../src/sealing/sealed-error.js';
import { type SealedResult, unseal } from '../../src/sealing/sealed-result.js';
import { TestContext } from '../helpers/context.js';
import { testKeyring } from '../helpers/keyring.js';

/**
 * The ledger used on its own (claims outside BullMQ, as a pg-boss or graphile-worker user would):
 * given the keyring, it seals the results and error text it keeps, and replays them opened;
 * without one it stores them as given, which its documentation says plainly.
 */
const t = new TestContext('ledger_sealing');
let sealing: PostgresLedger;
let plain: PostgresLedger;
const claim = (key: string) => ({
  key: { namespace: 'acme/mail.send', resourceKey: key, version: 'v1' },
  operation: 'mail.send',
  fingerprint: 'f'.repeat(64),
  leaseMs: 5000,
  retentionMs: 3_600_000,
  downstream: 'idempotent' as const,
});
const SECRET = { to: 'alice@example.com', token: 'sk_live_51HqLyjWDarjtT1zdp7dcXkzq' };

beforeAll(async () => {
  await t.setup();
  sealing = t.ledger({ keyring: testKeyring });
  plain = t.ledger();
});
afterAll(async () => {
  await sealing.close();
  await plain.close();
  await t.teardown();
});

async function storedRow(key: string): Promise<string> {
  const r = await t.query<{ row: string }>(
    `select row_to_json(l)::text as row from ${t.schema}.idempotency_ledger l where resource_key = $1 or key like $2`,
    [key, `%:${key}:%`],
  );
  return r.rows.map((x) => x.row).join('\n');
}

it('with a keyring, results and error text are stored sealed and replayed opened', async () => {
  const a = await sealing.claim(claim('r1'));
  if (a.kind !== 'acquired') throw new Error(a.kind);
  const done = await sealing.complete(a.key, a.epoch, SECRET);
  expect(done.result).toEqual(SECRET);
  const row = await storedRow('r1');
  expect(row).not.toContain('alice');
  expect(row).not.toContain('sk_live');
  expect(row).toContain('$sealed');

  const replay = await sealing.claim(claim('r1'));
  expect(replay).toMatchObject({ kind: 'completed', result: SECRET });
  expect((await sealing.get(a.key))?.result).toEqual(SECRET);
  // What the row holds is a sealed result, as BullMQ's is: unseal opens it with the same keys.
  const raw = (await plain.get(a.key))?.result as SealedResult<typeof SECRET>;
  expect(unseal(raw, testKeyring)).toEqual(SECRET);

  const b = await sealing.claim(claim('r2'));
  if (b.kind !== 'acquired') throw new Error(b.kind);
  await sealing.fail(b.key, b.epoch, { code: 'SMTP_REFUSED', message: `refused for ${SECRET.to}` }, 'terminal');
  const failedRow = await storedRow('r2');
  expect(failedRow).not.toContain('alice');
  expect(failedRow).toContain('SMTP_REFUSED');
  const recorded = (await sealing.get(b.key))?.error;
  expect(recorded?.message).toMatch(/^sealed message, \d+ bytes$/);
  expect(openRecordedError(recorded as NonNullable<typeof recorded>, testKeyring)?.message).toBe(
    `refused for ${SECRET.to}`,
  );

  const c = await sealing.claim(claim('r3'));
  if (c.kind !== 'acquired') throw new Error(c.kind);
  await sealing.markUnknown(c.key, c.epoch, { code: 'TIMEOUT', message: 'lost' });
  await sealing.resolve(c.key, { committed: true, result: SECRET }, { actorId: 'ops', reason: 'found it' });
  expect(await storedRow('r3')).not.toContain('alice');
  expect((await sealing.get(c.key))?.result).toEqual(SECRET);
});

it('without a keyring, the ledger stores what it is given, in clear', async () => {
  const a = await plain.claim(claim('p1'));
  if (a.kind !== 'acquired') throw new Error(a.kind);
  await plain.complete(a.key, a.epoch, SECRET);
  expect(await storedRow('p1')).toContain('alice@example.com');
});
