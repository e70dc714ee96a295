/**
 * What a `failed` listener receives carries only what may be told — the code, the class name, a
 * public message and how to open the stored copy — since applications log it (pino's err
 * serializer follows `cause`). No raw `code`, no `details` with zod issues, no `cause`; object keys
 * made of digits (card, CPF, BSN numbers used as keys) are keys, not array indexes, and are never
 * kept in clear in `failedReason` or the ledger's error. `originalError()` gives the error back in
 * this process.
 */
import { randomBytes, randomInt } from 'node:crypto';
import { inspect } from 'node:util';
import type { Queue } from 'bullmq';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { TerminalError } from '../../src/errors/processor-errors.js';
import { defineKeyring } from '../../src/sealing/keyring.js';
import { originalError } from '../../src/sealing/original-error.js';
import { sealInput } from '../../src/sealing/sealed-input.js';
import { withIdempotency } from '../../src/worker/with-idempotency.js';
import { testOperation } from '../fixtures/operations.js';
import { settled } from '../helpers/bullmq.js';
import { pinoErrLine } from '../helpers/pino-capture.js';
import { dumpPostgres, dumpRedis, plaintextFound } from '../helpers/stores.js';
import { wrapperFile } from '../helpers/wrapper-file.js';

const { t, b, ledger: fileLedger, closeAfter } = wrapperFile('failed_listener');

const digits = (n: number) => Array.from({ length: n }, () => randomInt(10)).join('');
const fresh = (tag: string) => `${tag}${randomBytes(18).toString('base64url')}`;

describe('what failed listeners receive', () => {
  it('no raw code, details, zod issues or cause; digit keys are never kept; the original in-process', async () => {
    const keyring = defineKeyring({ keys: [{ id: 'k1', secret: randomBytes(32) }] });
    const card = `4${digits(15)}`;
    const bsn = digits(9);
    const cpf = digits(11);
    const s = {
      code: `sk_live_${randomBytes(16).toString('hex')}`,
      details: fresh('det_'),
      cause: fresh('cause_'),
      key: fresh('k'),
    };
    const operation = testOperation({
      name: 'cards.sync',
      input: z.object({
        id: z.string(),
        // Keyed by the numbers themselves: a record's keys are data.
        byCard: z.record(z.string(), z.object({ limit: z.number().max(100) })).optional(),
      }),
      effect: (i) => ({ id: i.id }),
      resourceKey: (i) => `r:${i.id}`,
      result: z.strictObject({ ok: z.boolean(), byId: z.record(z.string(), z.number().int()).optional() }),
      sensitiveInput: ['byCard'],
    });
    const q: Queue = b.queue('cards');
    closeAfter(q);
    const w = b.worker(
      'cards',
      withIdempotency(
        operation,
        async (input) => {
          if (input.id === 'result') return { ok: true, byId: { [cpf]: 1.5 }, [s.key]: 1 } as never;
          throw new TerminalError(s.code, 'declined', {
            publicMessage: 'the card was declined',
            cause: Object.assign(new Error(`upstream said ${s.cause}`), { details: { [bsn]: s.details } }),
          });
        },
        { ledger: fileLedger(), keyring },
      ),
    );
    closeAfter(w);
    const told = new Map<string, Error>();
    w.on('failed', (job, err) => told.set(String(job?.id), err));

    // Input refused by its schema: a digit key inside sealed input, added without the helper.
    const inputJob = await q.add(
      'raw',
      sealInput(operation, { id: 'input', byCard: { [card]: { limit: 900 } } }, keyring, 'raw'),
    );
    const resultJob = await operation.enqueue(q, { id: 'result' }, { keyring });
    const thrownJob = await operation.enqueue(q, { id: 'thrown' }, { keyring });
    const input = await settled(q, inputJob.id as string);
    const result = await settled(q, resultJob.jobId);
    const thrown = await settled(q, thrownJob.jobId);

    expect([input.state, result.state, thrown.state]).toEqual(['failed', 'failed', 'failed']);
    expect(input.failedReason).toMatch(
      /^IDEMPOTENCY_INVALID_INPUT: Invalid input of cards.sync: byCard.….limit \(too_big\)$/,
    );
    expect(result.failedReason).toMatch(/^IDEMPOTENCY_INVALID_INPUT: Invalid result of cards.sync: .*byId.…/);
    const needles = [card, bsn, cpf, ...Object.values(s)];
    const ledgerErrors = JSON.stringify([(await fileLedger().get(operation.keyFor({ id: 'result' })))?.error]);
    expect(ledgerErrors).toContain('IDEMPOTENCY_INVALID_INPUT');
    expect(plaintextFound(ledgerErrors, needles)).toEqual([]);
    expect(plaintextFound(await dumpPostgres(t), needles)).toEqual([]);
    expect(plaintextFound(await dumpRedis(t), needles)).toEqual([]);

    expect(told.size).toBe(3);
    for (const [id, err] of told) {
      const shown = `${err.message}\n${err.stack}\n${JSON.stringify(err)}\n${inspect(err, { depth: 8, showHidden: true })}\n${pinoErrLine(err)}`;
      expect(plaintextFound(shown, needles), id).toEqual([]);
      expect(Object.keys(err), id).toEqual(['code']);
      expect('cause' in err, id).toBe(false);
      expect('details' in err, id).toBe(false);
    }
    // The thrown error's dirty code is a keyed ref; in this process the original is all there.
    const handed = told.get(thrownJob.jobId) as Error & { code: string };
    expect(handed.code).toBe('IDEMPOTENCY_RECORDED_FAILURE');
    const original = originalError(handed) as TerminalError;
    expect(original).toBeInstanceOf(TerminalError);
    expect(original.code).toBe(s.code);
    expect(String((original.cause as Error).message)).toContain(s.cause);
    const refused = originalError(told.get(inputJob.id as string)) as { details: { issues: { path: string }[] } };
    expect(refused.details.issues[0]?.path).toBe(`byCard.${card}.limit`);
  });
});
