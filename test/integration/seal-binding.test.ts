/**
 * A seal is bound to its place: a sealed value copied from one job, operation, field, row or
 * step into another does not open there, a value in clear where the library seals is refused,
 * and a result's clear fields are authenticated by its sealed copy. Each copy is made as an
 * attacker would: by `queue.add` with job data of one's own, or by writing the ledger's rows.
 */
import { randomBytes } from 'node:crypto';
import type { Queue } from 'bullmq';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { RetryableError } from '../../src/errors/processor-errors.js';
import { boundedKey } from '../../src/keys/idempotency-key.js';
import { ENVELOPE_FIELD } from '../../src/operation/envelope.js';
import { defineKeyring } from '../../src/sealing/keyring.js';
import { type SealedResult, unseal } from '../../src/sealing/sealed-result.js';
import { withIdempotency } from '../../src/worker/with-idempotency.js';
import { testOperation } from '../fixtures/operations.js';
import { settled } from '../helpers/bullmq.js';
import { codeOf } from '../helpers/code-of.js';
import { wrapperFile } from '../helpers/wrapper-file.js';

const { t, b, ledger: fileLedger, closeAfter } = wrapperFile('sealbind');
const keyring = defineKeyring({ keys: [{ id: 'k1', secret: randomBytes(32) }] });
const queue = (name: string): Queue => closeAfter(b.queue(name));
const worker: typeof b.worker = (...args) => closeAfter(b.worker(...args));

/** A payment of an account with a card and its cvc, both declared sensitive. */
function payOperation(name: string) {
  return testOperation({
    name,
    namespace: `test/${name}`,
    input: z.object({ account: z.string(), card: z.string(), cvc: z.string().optional() }),
    effect: (i) => ({ account: i.account }),
    resourceKey: (i) => `account:${i.account}`,
    sensitiveInput: ['card', 'cvc'],
  });
}

const table = () => `${t.schema}.idempotency_ledger`;

describe('sealed input opens only in the job, operation and field it was sealed for', () => {
  it("a victim's sealed card copied into jobs of one's own (other key, other operation, other field, plain job) is refused before anything runs", async () => {
    const pay = payOperation('bind.pay');
    const refund = payOperation('bind.refund');
    const charged: { account: string; card: string; cvc?: string | undefined }[] = [];
    const qp = queue('bind-pay');
    const qr = queue('bind-refund');
    worker(
      'bind-pay',
      withIdempotency(
        pay,
        async (i) => {
          charged.push(i);
          return { ok: true };
        },
        { ledger: fileLedger(), keyring },
      ),
    );
    worker(
      'bind-refund',
      withIdempotency(
        refund,
        async (i) => {
          charged.push(i);
          return { ok: true };
        },
        { ledger: fileLedger(), keyring },
      ),
    );
    const card = `4111-${randomBytes(6).toString('hex')}`;
    const cvc = `cvc-${randomBytes(4).toString('hex')}`;
    const victim = await pay.enqueue(qp, { account: 'victim', card, cvc }, { keyring });
    expect((await settled(qp, victim.jobId)).state).toBe('completed');
    const data = (await qp.getJob(victim.jobId))?.data as { input: { card: string; cvc: string } };
    const sealedCard = data.input.card;
    const sealedCvc = data.input.cvc;
    expect(sealedCard).toMatch(/^bqs2\.k1\./);

    const envelope = (op: typeof pay, account: string, input: Record<string, unknown>) => ({
      [ENVELOPE_FIELD]: { v: 1, operation: op.name, key: op.keyFor({ account, card: 'x' }) },
      input: { account, ...input },
    });
    const copies = {
      // Same operation, another key: the attacker's own account.
      otherKey: await qp.add(pay.name, envelope(pay, 'attacker', { card: sealedCard })),
      // A plain job (no envelope): the key comes from the input, the attacker's.
      plainJob: await qp.add(pay.name, { account: 'attacker2', card: sealedCard }),
      // Another operation, the same key string and field name.
      otherOperation: await qr.add(refund.name, envelope(refund, 'victim', { card: sealedCard })),
      // The same job's key, the fields swapped.
      otherField: await qp.add(pay.name, envelope(pay, 'victim', { card: sealedCvc, cvc: sealedCard })),
      // The helper's job with the sensitive field in clear: only a seal is accepted there.
      plaintext: await qp.add(pay.name, envelope(pay, 'attacker3', { card: '4000-clear' })),
    };
    const expected: Record<keyof typeof copies, string> = {
      otherKey: 'IDEMPOTENCY_SEAL_MISPLACED',
      plainJob: 'IDEMPOTENCY_SEAL_MISPLACED',
      otherOperation: 'IDEMPOTENCY_SEAL_MISPLACED',
      otherField: 'IDEMPOTENCY_SEAL_MISPLACED',
      plaintext: 'IDEMPOTENCY_SEAL_REQUIRED',
    };
    for (const [name, job] of Object.entries(copies)) {
      const q = name === 'otherOperation' ? qr : qp;
      const done = await settled(q, job.id as string);
      expect(done.state, name).toBe('failed');
      expect(done.failedReason, name).toContain(expected[name as keyof typeof copies]);
      expect(done.job.attemptsMade, `${name}: refused once, not retried`).toBe(1);
    }
    // Only the victim's own job ever saw the card; no other account was charged with it.
    expect(charged).toEqual([{ account: 'victim', card, cvc }]);
    // Refused before any claim: no row for the attackers' keys.
    const rows = await t.query(`select key from ${table()} order by key`);
    expect(rows.rows.map((r) => r.key)).toEqual([boundedKey(pay.keyFor({ account: 'victim', card }))]);
  });
});

describe('recorded results open only in their own row', () => {
  const publicOp = (name: string) =>
    testOperation({
      name,
      namespace: `test/${name}`,
      input: z.object({ id: z.string() }),
      effect: (i) => ({ id: i.id }),
      resourceKey: (i) => `r:${i.id}`,
      result: z.object({ assetId: z.string(), token: z.string() }),
      publicResult: ['assetId'],
    });

  it("a completed row's result copied into another key's row is refused on replay and by unseal", async () => {
    const operation = publicOp('bind.rows');
    let calls = 0;
    const q = queue('bind-rows');
    worker(
      'bind-rows',
      withIdempotency(
        operation,
        async (i) => {
          calls++;
          return { assetId: `asset-${i.id}`, token: `tok_${i.id}_${randomBytes(6).toString('hex')}` };
        },
        { ledger: fileLedger(), keyring },
      ),
    );
    const a = await operation.enqueue(q, { id: 'a' });
    const bJob = await operation.enqueue(q, { id: 'b' });
    expect((await settled(q, a.jobId)).state).toBe('completed');
    expect((await settled(q, bJob.jobId)).state).toBe('completed');
    const ka = boundedKey(operation.keyFor({ id: 'a' }));
    const kb = boundedKey(operation.keyFor({ id: 'b' }));
    await t.query(`update ${table()} set result = (select result from ${table()} where key = $1) where key = $2`, [
      ka,
      kb,
    ]);
    const copied = (await t.query(`select result from ${table()} where key = $1`, [kb])).rows[0]?.result;
    // The copy opens where it was sealed, and nowhere else.
    expect(unseal(copied as SealedResult<unknown>, keyring, { operation: operation.name, key: ka })).toMatchObject({
      assetId: 'asset-a',
    });
    expect(codeOf(() => unseal(copied as SealedResult<unknown>, keyring, { key: kb }))).toBe(
      'IDEMPOTENCY_SEAL_MISPLACED',
    );
    // A replay of b meets a's result in b's row: refused, never handed on as b's.
    const replay = await q.add('again', { id: 'b' });
    const done = await settled(q, replay.id as string);
    expect(done.state).toBe('failed');
    expect(done.failedReason).toContain('IDEMPOTENCY_SEAL_MISPLACED');
    expect(done.returnvalue).toBeNull();
    expect(calls).toBe(2);
  });

  it('a public field changed in the ledger is detected on replay and by unseal', async () => {
    const operation = publicOp('bind.public');
    const q = queue('bind-public');
    worker(
      'bind-public',
      withIdempotency(operation, async (i) => ({ assetId: `asset-${i.id}`, token: 'tok' }), {
        ledger: fileLedger(),
        keyring,
      }),
    );
    const first = await operation.enqueue(q, { id: 'p' });
    const done = await settled(q, first.jobId);
    const view = done.returnvalue as SealedResult<{ assetId: string; token: string }, 'assetId'>;
    expect(unseal(view, keyring)).toEqual({ assetId: 'asset-p', token: 'tok' });
    // BullMQ's copy changed: unseal says so.
    expect(codeOf(() => unseal({ ...view, assetId: 'asset-evil' } as never, keyring))).toBe(
      'IDEMPOTENCY_SEAL_PUBLIC_MISMATCH',
    );
    expect(codeOf(() => unseal({ ...view, extra: 1 } as never, keyring))).toBe('IDEMPOTENCY_SEAL_PUBLIC_MISMATCH');
    // The ledger's copy changed: the replay refuses it.
    const k = boundedKey(operation.keyFor({ id: 'p' }));
    await t.query(`update ${table()} set result = jsonb_set(result, '{assetId}', '"asset-evil"') where key = $1`, [k]);
    const replay = await q.add('again', { id: 'p' });
    const again = await settled(q, replay.id as string);
    expect(again.state).toBe('failed');
    expect(again.failedReason).toContain('IDEMPOTENCY_SEAL_PUBLIC_MISMATCH');
  });

  it("a step's result copied into another step's row, or replaced by plain JSON, is refused when the step replays", async () => {
    for (const [tamper, code] of [
      ['copy', 'IDEMPOTENCY_SEAL_MISPLACED'],
      ['plain', 'IDEMPOTENCY_SEAL_REQUIRED'],
    ] as const) {
      const name = `bind.steps.${tamper}`;
      const operation = testOperation({
        name,
        namespace: `test/${name}`,
        input: z.object({ id: z.string() }),
        effect: (i) => ({ id: i.id }),
        resourceKey: (i) => `r:${i.id}`,
      });
      const k = boundedKey(operation.keyFor({ id: 's' }));
      const stepKey = (step: string) =>
        boundedKey({ ...operation.keyFor({ id: 's' }), resourceKey: `r:s#step=${step}` });
      const seen: unknown[] = [];
      let attempts = 0;
      const q = queue(`bind-steps-${tamper}`);
      worker(
        `bind-steps-${tamper}`,
        withIdempotency(
          operation,
          async (_i, ctx) => {
            attempts++;
            const a = await ctx.step('a', async () => ({ limit: 100 }));
            const b = await ctx.step('b', async () => ({ limit: 5 }));
            seen.push(b);
            if (attempts === 1) {
              // Between attempts, the rows are rewritten where they are stored.
              const value =
                tamper === 'copy' ? `(select result from ${table()} where key = $2)` : `'{"limit": 1000000}'`;
              await t.query(
                `update ${table()} set result = ${value} where key = $1`,
                tamper === 'copy' ? [stepKey('b'), stepKey('a')] : [stepKey('b')],
              );
              throw new RetryableError('downstream busy');
            }
            return { a, b };
          },
          { ledger: fileLedger(), keyring },
        ),
      );
      expect(k).not.toBe(stepKey('a'));
      const { jobId } = await operation.enqueue(q, { id: 's' }, { jobOptions: { attempts: 3, backoff: 10 } });
      const done = await settled(q, jobId);
      expect(done.state, tamper).toBe('failed');
      expect(done.failedReason, tamper).toContain(code);
      // The second attempt never got the rewritten value, and was not retried.
      expect(seen, tamper).toEqual([{ limit: 5 }]);
      expect(attempts, tamper).toBe(2);
    }
  });
});
