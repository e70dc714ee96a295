/**
 * The operator CLI and sealed values, run as the real binary against records the real wrapper
 * wrote: shown sealed, opened only with the keyring and a reason, each opening audited first.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { TerminalError } from '../../src/errors/processor-errors.js';
import { boundedKey, type IdempotencyKey } from '../../src/keys/idempotency-key.js';
import type { PostgresLedger } from '../../src/ledger/postgres-ledger.js';
import { isSealedResult, type SealedResult, unseal } from '../../src/sealing/sealed-result.js';
import { withIdempotency } from '../../src/worker/with-idempotency.js';
import { orderOperation } from '../fixtures/operations.js';
import { bull, settled } from '../helpers/bullmq.js';
import { unknownRecord } from '../helpers/cli-records.js';
import { TestContext } from '../helpers/context.js';
import { TEST_KEYRING_SPEC, testKeyring } from '../helpers/keyring.js';
import { childEnv, runTs } from '../helpers/spawn.js';
import { plaintextFound } from '../helpers/stores.js';

const t = new TestContext('cli_sealed');
const b = bull(t);
let ledger: PostgresLedger;

const env = (vars: Record<string, string | undefined>) =>
  childEnv({ DATABASE_URL: t.databaseUrl, REDIS_URL: t.redisUrl, BQI_SCHEMA: t.schema, BQI_PREFIX: t.prefix, ...vars });
/** The CLI without a keyring unless one is given. */
const cli = (args: string[], vars: Record<string, string | undefined> = {}) =>
  runTs('src/cli/main.ts', args, env(vars));
const withKey = { BQI_KEYRING: TEST_KEYRING_SPEC };

/** A fresh secret for each use: nothing here can pass by matching a known format. */
const fresh = (tag: string) => `${tag}${randomBytes(18).toString('base64url')}`;

const operation = orderOperation('payments.charge', {
  result: z.object({ chargeId: z.string(), cardToken: z.string() }),
  publicResult: ['chargeId'],
});
const keyOf = (order: string): IdempotencyKey => ({
  namespace: 'acme/payments.charge',
  resourceKey: `order:${order}`,
  version: 'v1',
});

const resultSecret = fresh('tok_');
const errorSecret = fresh('pan ');
const declinedMessage = `card declined for ${errorSecret}`;
let paidKey: string;
let paidJobId: string;
let declinedKey: string;

async function decryptRows(key: string) {
  const r = await t.query(
    `select * from ${t.schema}.audit_events where action = 'operator.decrypt' and resource_id = $1`,
    [key],
  );
  return r.rows;
}

const unknown = (order: string) => unknownRecord(ledger, keyOf(order), 'payments.charge');

beforeAll(async () => {
  await t.setup();
  ledger = t.ledger();
  const q = b.queue('charges');
  const w = b.worker(
    'charges',
    withIdempotency(
      operation,
      async (input) => {
        if (input.order === 'declined') throw new TerminalError('CARD_DECLINED', declinedMessage);
        return { chargeId: 'ch_1', cardToken: resultSecret };
      },
      { ledger, keyring: testKeyring },
    ),
  );
  const paid = await operation.enqueue(q, { order: 'paid' });
  const declined = await operation.enqueue(q, { order: 'declined' });
  expect((await settled(q, paid.jobId)).state).toBe('completed');
  expect((await settled(q, declined.jobId)).state).toBe('failed');
  await w.close();
  await q.close();
  paidKey = boundedKey(keyOf('paid'));
  paidJobId = paid.jobId;
  declinedKey = boundedKey(keyOf('declined'));
});
afterAll(async () => {
  await ledger.close();
  await t.teardown();
});

describe('sealed values in the CLI', () => {
  it('inspect, inspect --json, --job and timeline show sealed values as sealed, with no plaintext', async () => {
    const [human, json, failedHuman, failedJson, byJob, tl, tlJson] = await Promise.all([
      cli(['inspect', paidKey], withKey),
      cli(['inspect', paidKey, '--json']),
      cli(['inspect', declinedKey]),
      cli(['inspect', declinedKey, '--json'], withKey),
      cli(['inspect', '--job', 'charges', paidJobId]),
      cli(['timeline', '--operation', declinedKey]),
      cli(['timeline', '--operation', paidKey, '--json']),
    ]);
    for (const r of [human, json, failedHuman, failedJson, byJob, tl, tlJson]) {
      expect(r.code, r.stderr).toBe(0);
      expect(plaintextFound(r.stdout + r.stderr, [resultSecret, errorSecret])).toEqual([]);
    }
    expect(human.stdout).toMatch(/^result:\s+\{"chargeId":"ch_1"\} \+ sealed \(key t1, \d+ bytes\)$/m);
    expect(failedHuman.stdout).toMatch(
      new RegExp(
        `^error:\\s+CARD_DECLINED \\(TerminalError\\): sealed message, ${Buffer.byteLength(declinedMessage)} bytes; text sealed \\(key t1, \\d+ bytes\\)$`,
        'm',
      ),
    );
    // --json: the stored forms, sealed strings as they are.
    const record = JSON.parse(json.stdout);
    expect(record.result.chargeId).toBe('ch_1');
    expect(record.result.$sealed).toMatch(/^bqs2\.t1\./);
    expect(unseal(record.result, testKeyring)).toEqual({ chargeId: 'ch_1', cardToken: resultSecret });
    const failed = JSON.parse(failedJson.stdout);
    expect(failed.error).toMatchObject({ code: 'CARD_DECLINED', name: 'TerminalError' });
    expect(failed.error.sealed).toMatch(/^bqs2\.t1\./);
    expect(failed).not.toHaveProperty('opened');
    expect(byJob.stdout).toContain('+ sealed (key t1,');
    expect(tl.stdout).toContain(`final: ${declinedKey} failed`);
  });

  it('inspect --decrypt prints the exact values after exactly one operator.decrypt audit event each', async () => {
    expect(await decryptRows(paidKey)).toHaveLength(0);
    expect(await decryptRows(declinedKey)).toHaveLength(0);
    const [paid, declined] = await Promise.all([
      cli(['inspect', paidKey, '--decrypt', '--reason', 'refund dispute, case 1234', '--actor', 'alice'], withKey),
      cli(['inspect', declinedKey, '--decrypt', '--reason', 'support ticket', '--actor', 'bob', '--json'], withKey),
    ]);
    expect(paid.code, paid.stderr).toBe(0);
    expect(paid.stdout).toContain(`opened result: ${JSON.stringify({ chargeId: 'ch_1', cardToken: resultSecret })}\n`);
    const [paidEvent, ...morePaid] = await decryptRows(paidKey);
    expect(morePaid).toHaveLength(0);
    expect(paidEvent).toMatchObject({
      actor_type: 'user',
      actor_id: 'alice',
      resource_type: 'idempotency_key',
      resource_id: paidKey,
      reason_code: 'OPERATOR_DECRYPTED',
    });
    expect(paidEvent?.details).toMatchObject({
      reason: 'refund dispute, case 1234',
      opened: ['result'],
      keyIds: ['t1'],
    });
    expect(paid.stdout).toContain(`audit event ${paidEvent?.event_id} (actor user:alice)`);
    // The audit trail says who, what and why; never the value.
    expect(plaintextFound(JSON.stringify(paidEvent), [resultSecret])).toEqual([]);

    expect(declined.code, declined.stderr).toBe(0);
    const out = JSON.parse(declined.stdout);
    expect(out.opened.error).toMatchObject({ name: 'TerminalError', code: 'CARD_DECLINED', message: declinedMessage });
    expect(out.opened.error.text).toContain(declinedMessage);
    expect(out.error.sealed).toMatch(/^bqs2\.t1\./); // the stored form stays beside the opened one
    const declinedEvents = await decryptRows(declinedKey);
    expect(declinedEvents).toHaveLength(1);
    expect(declinedEvents[0]).toMatchObject({ actor_id: 'bob', event_id: out.auditEventId });
    expect(declinedEvents[0]?.details).toMatchObject({ reason: 'support ticket', opened: ['error'] });

    // Each opening is its own event; the human form shows the error's message and whole text.
    const again = await cli(['inspect', declinedKey, '--decrypt', '--reason', 'second look'], withKey);
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout).toMatch(new RegExp(`^opened error:\\s+TerminalError CARD_DECLINED: ${declinedMessage}$`, 'm'));
    expect(again.stdout).toMatch(new RegExp(`^opened error text:\n  TerminalError: ${declinedMessage}\n  +at `, 'm'));
    expect(await decryptRows(declinedKey)).toHaveLength(2);

    // The opening is part of the operation's story.
    const tl = await cli(['timeline', '--operation', paidKey]);
    expect(tl.stdout).toMatch(/operator\.decrypt .*user:alice/);
  });

  it('--decrypt without a keyring, without a reason, with a keyring that lacks the key, or when the audit write fails prints no plaintext and audits nothing', async () => {
    const before = (await decryptRows(paidKey)).length;
    const otherKeyring = `k9:base64:${randomBytes(32).toString('base64')}`;
    const [noKeyring, noReason, reasonAlone, wrongKey] = await Promise.all([
      cli(['inspect', paidKey, '--decrypt', '--reason', 'x']),
      cli(['inspect', paidKey, '--decrypt'], withKey),
      cli(['inspect', paidKey, '--reason', 'x'], withKey),
      cli(['inspect', paidKey, '--decrypt', '--reason', 'rotation check'], { BQI_KEYRING: otherKeyring }),
    ]);
    expect(noKeyring.code).toBe(3);
    expect(noKeyring.stderr).toContain('IDEMPOTENCY_ENV_CONFIG: BQI_KEYRING is required by --decrypt');
    expect(noReason.code).toBe(2);
    expect(noReason.stderr).toContain('--decrypt needs --reason <text>');
    expect(reasonAlone.code).toBe(2);
    expect(reasonAlone.stderr).toContain('--reason goes with --decrypt only');
    expect(wrongKey.code).toBe(1);
    expect(wrongKey.stderr).toContain('IDEMPOTENCY_SEAL_KEY_UNKNOWN');
    expect(wrongKey.stderr).toContain('sealed with key t1, which BQI_KEYRING does not hold (it holds k9)');
    for (const r of [noKeyring, noReason, reasonAlone, wrongKey]) expect(r.stdout).toBe('');

    // The audit trail refuses this opening's event: the value is not shown.
    await t.query(`create function ${t.schema}.refuse_probe() returns trigger language plpgsql as $$
      begin
        if new.details->>'reason' = 'audit down probe' then raise exception 'audit trail is down'; end if;
        return new;
      end $$`);
    await t.query(
      `create trigger refuse_probe before insert on ${t.schema}.audit_events for each row execute function ${t.schema}.refuse_probe()`,
    );
    const auditDown = await cli(['inspect', paidKey, '--decrypt', '--reason', 'audit down probe'], withKey);
    await t.query(`drop trigger refuse_probe on ${t.schema}.audit_events`);
    expect(auditDown.code).toBe(1);
    expect(auditDown.stderr).toContain('the audit event of this opening could not be written');
    expect(auditDown.stdout).toBe('');
    for (const r of [noKeyring, noReason, reasonAlone, wrongKey, auditDown]) {
      expect(plaintextFound(r.stdout + r.stderr, [resultSecret])).toEqual([]);
    }
    expect(await decryptRows(paidKey)).toHaveLength(before);
  });

  it('a malformed or weak BQI_KEYRING is a configuration error that never shows the secret', async () => {
    const weak = 'hunter2hunter2hunter2hunter2hunter2';
    const encoded = randomBytes(32).toString('base64');
    const [tooWeak, noId, notPairs] = await Promise.all([
      cli(['inspect', paidKey], { BQI_KEYRING: `k1:${weak}` }),
      cli(['inspect', paidKey], { BQI_KEYRING: `base64:${encoded}` }),
      cli(['stats'], { BQI_KEYRING: encoded }),
    ]);
    expect(tooWeak.code).toBe(3);
    expect(tooWeak.stderr).toContain('IDEMPOTENCY_ENV_CONFIG: BQI_KEYRING is not a usable keyring: key k1 is too weak');
    expect(noId.code).toBe(3);
    expect(noId.stderr).toContain('IDEMPOTENCY_ENV_CONFIG: BQI_KEYRING is not a usable keyring: entry 1 has no key id');
    expect(notPairs.code).toBe(3);
    expect(notPairs.stderr).toContain('IDEMPOTENCY_ENV_CONFIG: BQI_KEYRING is not a usable keyring');
    for (const r of [tooWeak, noId, notPairs]) {
      expect(r.stdout).toBe('');
      expect(plaintextFound(r.stderr, [weak, encoded])).toEqual([]);
      expect(r.stderr).not.toContain('hunter2');
    }
  });

  it('resolve --committed seals the result before it is recorded; a replay unseals to exactly that JSON', async () => {
    const secret = fresh('sk_');
    const resultJson = JSON.stringify({ secret, amount: 42, tags: ['a', 'ü'] });
    const key = await unknown('resolve-sealed');
    const refused = await unknown('resolve-refused');
    const [noKeyring, badJson, resolved] = await Promise.all([
      cli(['resolve', refused, '--committed', '--result', resultJson, '--reason', 'x']),
      cli(['resolve', refused, '--committed', '--result', resultJson.slice(0, -1), '--reason', 'x'], withKey),
      cli(
        [
          'resolve',
          key,
          '--committed',
          '--result',
          resultJson,
          '--reason',
          'found it in the provider',
          '--actor',
          'jane@example.com',
        ],
        withKey,
      ),
    ]);
    expect(noKeyring.code).toBe(3);
    expect(noKeyring.stderr).toContain('BQI_KEYRING is required by resolve --committed');
    expect(badJson.code).toBe(2);
    expect(badJson.stderr).toContain('--result is not JSON');
    expect(await ledger.get(refused)).toMatchObject({ status: 'unknown', result: null });

    expect(resolved.code, resolved.stderr).toBe(0);
    expect(resolved.stdout).toContain('as committed');
    expect(resolved.stdout).not.toContain('jane@example.com'); // the actor goes to the audit trail only
    for (const r of [noKeyring, badJson, resolved]) expect(plaintextFound(r.stdout + r.stderr, [secret])).toEqual([]);

    const row = await t.query(`select result::text as result from ${t.schema}.idempotency_ledger where key = $1`, [
      key,
    ]);
    expect(plaintextFound(row.rows[0]?.result ?? '', [secret])).toEqual([]);
    const replay = await ledger.claim({
      key: keyOf('resolve-sealed'),
      operation: 'payments.charge',
      fingerprint: 'fp-order:resolve-sealed',
      leaseMs: 10_000,
      retentionMs: 3_600_000,
      downstream: 'none',
    });
    expect(replay.kind).toBe('completed');
    const stored = (replay as { result: SealedResult<unknown> }).result;
    expect(isSealedResult(stored)).toBe(true);
    expect(unseal(stored, testKeyring)).toEqual(JSON.parse(resultJson));

    const opened = await cli(['inspect', key, '--decrypt', '--reason', 'check the resolution'], withKey);
    expect(opened.code, opened.stderr).toBe(0);
    expect(opened.stdout).toContain(`opened result: ${resultJson}`);
  });

  it('resolve --committed --public keeps the named fields in clear as the completion of the operation does', async () => {
    const secret = fresh('tok_');
    const resultJson = JSON.stringify({ chargeId: 'ch_9', cardToken: secret });
    const key = await unknown('resolve-public');
    const refused = await unknown('resolve-public-refused');
    const notAField = fresh('sk_');
    const [resolved, missing, notObject, notCommitted, doubled] = await Promise.all([
      cli(['resolve', key, '--committed', '--result', resultJson, '--public', 'chargeId', '--reason', 'seen'], withKey),
      cli(['resolve', refused, '--committed', '--result', resultJson, '--public', notAField, '--reason', 'x'], withKey),
      cli(['resolve', refused, '--committed', '--result', '"ch_9"', '--public', 'chargeId', '--reason', 'x'], withKey),
      cli(['resolve', refused, '--not-committed', '--public', 'chargeId', '--reason', 'x'], withKey),
      cli(
        ['resolve', refused, '--committed', '--result', resultJson, '--public', 'chargeId,chargeId', '--reason', 'x'],
        withKey,
      ),
    ]);
    expect(resolved.code, resolved.stderr).toBe(0);
    expect(resolved.stdout).toContain('in clear beside the sealed copy: chargeId');
    for (const r of [missing, notObject, notCommitted, doubled]) expect(r.code, r.stderr).toBe(2);
    expect(missing.stderr).toContain('--public names 1 field(s) that are not top-level fields of --result');
    expect(notCommitted.stderr).toContain('--public goes with --committed only');
    for (const r of [resolved, missing, notObject, doubled]) {
      expect(plaintextFound(r.stdout + r.stderr, [secret, notAField])).toEqual([]);
    }
    expect(await ledger.get(refused)).toMatchObject({ status: 'unknown', result: null });

    // The same stored shape as the row the operation's own completion wrote: the public field in clear.
    const completed = (await ledger.get(paidKey))?.result as Record<string, unknown>;
    const stored = (await ledger.get(key))?.result as Record<string, unknown>;
    expect(Object.keys(completed).sort()).toEqual(['$sealed', 'chargeId']);
    expect(Object.keys(stored).sort()).toEqual(Object.keys(completed).sort());
    expect(stored.chargeId).toBe('ch_9');
    expect(plaintextFound(JSON.stringify(stored), [secret])).toEqual([]);
    const replay = await ledger.claim({
      key: keyOf('resolve-public'),
      operation: 'payments.charge',
      fingerprint: 'fp-order:resolve-public',
      leaseMs: 10_000,
      retentionMs: 3_600_000,
      downstream: 'none',
    });
    expect(replay.kind).toBe('completed');
    const replayed = (replay as { result: SealedResult<{ chargeId: string }, 'chargeId'> }).result;
    expect(replayed).toEqual(stored);
    expect(unseal(replayed, testKeyring, { operation: 'payments.charge', key })).toEqual(JSON.parse(resultJson));
  });
});
