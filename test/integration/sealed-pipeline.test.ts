import { randomBytes } from 'node:crypto';
import type { Queue } from 'bullmq';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { RetryableError, TerminalError } from '../../src/errors/processor-errors.js';
import { boundedKey } from '../../src/keys/idempotency-key.js';
import type { PostgresLedger } from '../../src/ledger/postgres-ledger.js';
import { defineKeyring, type Keyring } from '../../src/sealing/keyring.js';
import { openRecordedError } from '../../src/sealing/sealed-error.js';
import { type SealedResult, unseal } from '../../src/sealing/sealed-result.js';
import { withIdempotency } from '../../src/worker/with-idempotency.js';
import { testOperation } from '../fixtures/operations.js';
import { bull, settled } from '../helpers/bullmq.js';
import { TestContext } from '../helpers/context.js';
import { dumpPostgres, dumpRedis, plaintextFound } from '../helpers/stores.js';

const t = new TestContext('sealed');
const b = bull(t);
let ledger: PostgresLedger;

beforeAll(async () => {
  await t.setup();
  ledger = t.ledger();
});
/** Queues and workers of the test, closed after it even when it failed half-way. */
const open: { close: () => Promise<unknown> }[] = [];
afterEach(async () => {
  for (const c of open.splice(0).reverse()) await c.close();
});
const queue = (name: string): Queue => {
  const q = b.queue(name);
  open.push(q);
  return q;
};
const worker: typeof b.worker = (...args) => {
  const w = b.worker(...args);
  open.push(w);
  return w;
};

afterAll(async () => {
  await ledger.close();
  await t.teardown();
});

/** A fresh secret for each use: nothing here can pass by matching a known format. */
const fresh = (tag: string) => `${tag}${randomBytes(18).toString('base64url')}`;
const key = () => ({ id: 'k1', secret: randomBytes(32) });

function op(name: string) {
  return testOperation({
    name,
    namespace: `test/${name}`,
    input: z.object({ id: z.string(), note: z.string().optional() }),
    effect: (i) => ({ id: i.id }),
    resourceKey: (i) => `r:${i.id}`,
  });
}

describe('results are recorded exactly and sealed', () => {
  it('first attempt, replay and unseal(job.returnvalue) are deep-equal to what the processor returned; no plaintext stored', async () => {
    const keyring = defineKeyring({ keys: [key()] });
    const secrets = [fresh('tok_'), fresh('Bearer '), fresh('pw with spaces '), fresh('ünï😀')];
    const operation = testOperation({
      name: 'assets.create',
      namespace: 'test/assets.create',
      input: z.object({ id: z.string() }),
      effect: (i) => ({ id: i.id }),
      resourceKey: (i) => `asset:${i.id}`,
      result: z.object({ assetId: z.string(), accessToken: z.string(), body: z.unknown() }),
      publicResult: ['assetId'],
    });
    const returned: unknown[] = [];
    let calls = 0;
    const processor = async (input: { id: string }) => {
      calls++;
      const value = {
        assetId: `asset-${input.id}`,
        accessToken: secrets[0] as string,
        body: {
          header: secrets[1],
          phrase: secrets[2],
          unicode: secrets[3],
          bytes: Buffer.from(secrets[0] as string),
          at: new Date('2026-12-01T00:00:00.001Z'),
          list: [1, 'two', { three: [3] }],
        },
      };
      returned.push(value);
      return value;
    };
    const q = queue('assets');
    worker('assets', withIdempotency(operation, processor, { ledger, keyring }));
    const { jobId } = await operation.enqueue(q, { id: '1' });
    const first = await settled(q, jobId);
    const again = await q.add('again', { id: '1' }); // same intent, another job: a replay
    const replay = await settled(q, again.id as string);

    expect(calls).toBe(1);
    expect(first.state).toBe('completed');
    const view = first.returnvalue as SealedResult<{ assetId: string }, 'assetId'>;
    expect(view.assetId).toBe('asset-1'); // declared public: in clear
    expect(unseal(view, keyring)).toStrictEqual(returned[0]);
    expect(unseal(replay.returnvalue, keyring)).toStrictEqual(returned[0]);
    expect(Buffer.isBuffer((unseal(replay.returnvalue, keyring) as { body: { bytes: unknown } }).body.bytes)).toBe(
      true,
    );
    const stored = await dumpPostgres(t);
    const redis = await dumpRedis(t);
    expect(stored).toContain('asset-1');
    expect(redis).toContain('asset-1');
    expect(plaintextFound(stored, secrets)).toEqual([]);
    expect(plaintextFound(redis, secrets)).toEqual([]);
  });

  it('step results: recorded sealed, and a resumed job gets the exact value back without running the step again', async () => {
    const keyring = defineKeyring({ keys: [key()] });
    const secret = fresh('step_');
    const operation = op('steps.run');
    let stepRuns = 0;
    let attempts = 0;
    const seen: unknown[] = [];
    const q = queue('steps');
    worker(
      'steps',
      withIdempotency(
        operation,
        async (_input, ctx) => {
          attempts++;
          const a = await ctx.step('a', async () => {
            stepRuns++;
            return { secret, bytes: Buffer.from([1, 2, 3]), at: new Date(0) };
          });
          seen.push(a);
          if (attempts === 1) throw new RetryableError('downstream busy');
          return { ok: true };
        },
        { ledger, keyring },
      ),
    );
    const { jobId } = await operation.enqueue(q, { id: 's1' }, { jobOptions: { attempts: 2, backoff: 10 } });
    expect((await settled(q, jobId)).state).toBe('completed');
    expect(stepRuns).toBe(1);
    expect(seen).toHaveLength(2);
    expect(seen[1]).toStrictEqual(seen[0]);
    expect(plaintextFound(await dumpPostgres(t), [secret])).toEqual([]);
  });

  it('rotation: recorded under k1, replayed under [k2, k1] (no false conflict); with k1 removed, a clear code', async () => {
    const k1 = key();
    const before = defineKeyring({ keys: [k1] });
    const after = defineKeyring({ keys: [{ id: 'k2', secret: randomBytes(32) }, k1] });
    const removed = defineKeyring({ keys: [{ id: 'k2', secret: randomBytes(32) }] });
    const operation = op('rotate.run');
    const secret = fresh('rot_');
    let calls = 0;
    const processor = async () => {
      calls++;
      return { secret };
    };
    const q1 = queue('rot1');
    const w1 = worker('rot1', withIdempotency(operation, processor, { ledger, keyring: before }));
    const first = await settled(q1, (await operation.enqueue(q1, { id: 'x' })).jobId);
    await w1.close();

    const q2 = queue('rot2');
    const w2 = worker('rot2', withIdempotency(operation, processor, { ledger, keyring: after }));
    const replay = await settled(q2, (await operation.enqueue(q2, { id: 'x', note: 'after rotation' })).jobId);
    expect(replay.state).toBe('completed');
    expect(calls).toBe(1);
    expect(unseal(replay.returnvalue, after)).toStrictEqual({ secret });
    expect(unseal(first.returnvalue, after)).toStrictEqual({ secret });
    // Changed input is still a conflict after the rotation.
    const same = await settled(q2, (await q2.add('c', { id: 'x', note: 'tracing only' })).id as string);
    expect(same.state).toBe('completed'); // same effect fields: a replay
    expect(calls).toBe(1);
    // Changed effect fields under the same key are still refused after the rotation.
    // (another queue: in this one the key's job id is taken, so BullMQ would absorb the add)
    const q2b = queue('rot2b');
    worker('rot2b', withIdempotency(operation, processor, { ledger, keyring: after }));
    const changed = await settled(q2b, (await operation.enqueue(q2b, { id: 'y' }, { resourceKey: 'r:x' })).jobId);
    expect(changed.failedReason).toMatch(/^IDEMPOTENCY_CONFLICT/);
    expect(calls).toBe(1);
    await w2.close();

    const q3 = queue('rot3');
    worker('rot3', withIdempotency(operation, processor, { ledger, keyring: removed }));
    const lost = await settled(q3, (await operation.enqueue(q3, { id: 'x' })).jobId);
    expect(lost.state).toBe('failed');
    expect(lost.failedReason).toMatch(/^IDEMPOTENCY_SEAL_KEY_UNKNOWN/);
    expect(calls).toBe(1);
    let code: string | undefined;
    try {
      unseal(first.returnvalue, removed);
    } catch (err) {
      code = (err as { code?: string }).code;
    }
    expect(code).toBe('IDEMPOTENCY_SEAL_KEY_UNKNOWN');
  });
});

describe('error text is sealed; code and class stay readable', () => {
  class HttpError extends Error {
    constructor(
      message: string,
      readonly response: { headers: Record<string, string> },
    ) {
      super(message);
      this.name = 'HttpError';
    }
  }

  it('every shape of thrown value: no plaintext in the ledger, failedReason or stacktrace; the sealed text opens', async () => {
    const keyring = defineKeyring({ keys: [key()] });
    const s = {
      error: fresh('e_'),
      subclass: fresh('sub_'),
      header: fresh('hdr_'),
      object: fresh('obj_'),
      string: fresh('str_'),
      cause: fresh('cause_'),
      aggregate: fresh('agg_'),
      code: `sk_live_${randomBytes(16).toString('hex')}`,
      name: `Err${randomBytes(16).toString('hex')}`,
      terminal: fresh('term_'),
    };
    const throwers: Record<string, () => never> = {
      error: () => {
        throw new Error(`connect failed: ${s.error}`);
      },
      subclass: () => {
        throw new HttpError(`401 for ${s.subclass}`, { headers: { authorization: s.header } });
      },
      object: () => {
        throw { message: 'plain object', token: s.object };
      },
      string: () => {
        throw `a string: ${s.string}`;
      },
      cause: () => {
        throw new Error('outer', { cause: new Error(`inner ${s.cause}`) });
      },
      aggregate: () => {
        throw new AggregateError([new Error(`one ${s.aggregate}`), 'two'], 'many');
      },
      code: () => {
        throw Object.assign(new Error('with a dirty code'), { code: s.code });
      },
      name: () => {
        const e = new Error('with a dirty name');
        e.name = s.name;
        throw e;
      },
      terminal: () => {
        throw new TerminalError('CARD_DECLINED', `declined for ${s.terminal}`, {
          publicMessage: 'the card was declined',
        });
      },
    };
    const operation = op('errors.run');
    const q = queue('errors');
    worker(
      'errors',
      withIdempotency(operation, async (input) => (throwers[input.id] as () => never)(), { ledger, keyring }),
    );
    const results = new Map<string, Awaited<ReturnType<typeof settled>>>();
    for (const id of Object.keys(throwers)) {
      results.set(id, await settled(q, (await operation.enqueue(q, { id })).jobId));
    }
    for (const [id, r] of results) expect(r.state, id).toBe('failed');

    const all = Object.values(s);
    const stored = await dumpPostgres(t);
    const redis = await dumpRedis(t);
    expect(redis).toContain('stacktrace');
    expect(plaintextFound(stored, all)).toEqual([]);
    expect(plaintextFound(redis, all)).toEqual([]);

    // Readable where it may be: code, class, the public message, the sealed marker.
    expect(results.get('terminal')?.failedReason).toMatch(/CARD_DECLINED.*the card was declined/);
    expect(results.get('error')?.failedReason).toMatch(
      /^Error: sealed message, \d+ bytes; open it with BQI_KEYRING set: /,
    );
    expect(results.get('object')?.failedReason).toMatch(/^NON_ERROR_THROWN \(NonErrorThrown\): sealed message/);
    expect(results.get('code')?.failedReason).toMatch(/^ref:k1:[A-Za-z0-9_-]{22} \(Error\): sealed message/);
    // The stack BullMQ keeps carries the sealed text; with the key, it is all there.
    const stack = (await q.getJob(results.get('cause')?.job.id as string))?.stacktrace?.[0] ?? '';
    const sealedStack = /sealed: (bqs2\.\S+)/.exec(stack)?.[1];
    expect(sealedStack).toMatch(/^bqs2\./);
    const opened = keyring.openPlaced<{ text: string }>(sealedStack as string, 'error');
    expect(opened.value.text).toContain(s.cause);
    expect(opened.place.key).toBe(boundedKey(operation.keyFor({ id: 'cause' })));
    // The ledger's record opens to the whole text, causes and AggregateError's errors included.
    for (const id of ['error', 'subclass', 'cause', 'aggregate', 'object', 'terminal']) {
      const error = (await ledger.get(operation.keyFor({ id })))?.error;
      const text = error ? (openRecordedError(error, keyring)?.text ?? '') : '';
      expect(text, id).toContain(s[id as keyof typeof s]);
    }
  });
});

describe('results that cannot be recorded', () => {
  it('a result failing its schema: the recorded error names paths and issue codes, never the data', async () => {
    const keyring = defineKeyring({ keys: [key()] });
    const dirtyKey = fresh('sk_');
    const operation = testOperation({
      name: 'strict.result',
      namespace: 'test/strict.result',
      input: z.object({ id: z.string() }),
      effect: (i) => i,
      resourceKey: (i) => `r:${i.id}`,
      result: z.strictObject({ ok: z.boolean() }),
    });
    const q = queue('strict');
    worker(
      'strict',
      withIdempotency(operation, async () => ({ ok: true, [dirtyKey]: 1 }) as { ok: boolean }, { ledger, keyring }),
    );
    const r = await settled(q, (await operation.enqueue(q, { id: 'a' })).jobId);
    expect(r.state).toBe('failed');
    expect(r.failedReason).toMatch(
      /^IDEMPOTENCY_INVALID_INPUT: Invalid result of strict.result: \(root\) \(unrecognized_keys\)/,
    );
    const rec = await ledger.get(operation.keyFor({ id: 'a' }));
    expect(rec?.status).toBe('unknown'); // the effect ran: an operator decides
    expect(plaintextFound(await dumpPostgres(t), [dirtyKey])).toEqual([]);
    expect(plaintextFound(await dumpRedis(t), [dirtyKey])).toEqual([]);
    expect(openRecordedError(rec?.error ?? { code: '', message: '' }, keyring)?.text).toContain(dirtyKey);
  });

  it('a frozen error is replaced, not rewritten in place: still no plaintext, still a code', async () => {
    const keyring = defineKeyring({ keys: [key()] });
    const secret = fresh('frozen_');
    const operation = op('frozen.run');
    const q = queue('frozen');
    worker(
      'frozen',
      withIdempotency(
        operation,
        async () => {
          throw Object.freeze(new TerminalError('FROZEN', `frozen ${secret}`));
        },
        { ledger, keyring },
      ),
    );
    const r = await settled(q, (await operation.enqueue(q, { id: 'f' })).jobId);
    expect(r.state).toBe('failed');
    expect(r.failedReason).toMatch(/FROZEN/);
    expect(plaintextFound(await dumpRedis(t), [secret])).toEqual([]);
  });
});

describe('declared sensitive input travels sealed', () => {
  function cardOp() {
    return testOperation({
      name: 'cards.charge',
      namespace: 'test/cards.charge',
      input: z.object({ order: z.string(), card: z.string(), cvc: z.string() }),
      effect: (i) => ({ order: i.order }),
      resourceKey: (i) => `order:${i.order}`,
      sensitiveInput: ['card', 'cvc'],
    });
  }

  it('enqueue seals the fields, the processor gets them exactly, Redis never holds them', async () => {
    const keyring: Keyring = defineKeyring({ keys: [key()] });
    const operation = cardOp();
    const card = `4111 ${randomBytes(6).toString('hex')}`;
    const cvc = fresh('cvc');
    const got: unknown[] = [];
    const q = queue('cards');
    worker(
      'cards',
      withIdempotency(
        operation,
        async (input) => {
          got.push(input);
          return { ok: true };
        },
        { ledger, keyring },
      ),
    );
    const { jobId } = await operation.enqueue(q, { order: 'o1', card, cvc }, { keyring });
    const job = await q.getJob(jobId);
    expect(JSON.stringify(job?.data)).not.toContain(card);
    expect((await settled(q, jobId)).state).toBe('completed');
    expect(got).toEqual([{ order: 'o1', card, cvc }]);
    expect(plaintextFound(await dumpRedis(t), [card, cvc])).toEqual([]);
    // A job added without the helper, in clear, still works.
    const plain = await q.add('plain', { order: 'o2', card, cvc });
    expect((await settled(q, plain.id as string)).state).toBe('completed');
    expect(got).toHaveLength(2);
  });

  it('enqueue without a keyring is refused (fail closed): nothing is added', async () => {
    const operation = cardOp();
    const q = queue('cards-refused');
    await expect(operation.enqueue(q, { order: 'o3', card: '1', cvc: '2' })).rejects.toMatchObject({
      code: 'IDEMPOTENCY_CONFIG',
    });
    expect(await q.count()).toBe(0);
  });
});
