/**
 * Who answers a confirmation over HTTP: the operator of the bearer token, never the body. The
 * operations process is started from the environment (`BQI_OPERATORS`) and called over real
 * HTTP; the requests and their answers are read back from Postgres, the parked jobs from BullMQ.
 */
import { createHash, randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Queue } from 'bullmq';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/env.js';
import { ConfirmationStore, type NewConfirmation } from '../../src/confirm/confirmation-store.js';
import { confirmationHttpHandler } from '../../src/confirm/http-handler.js';
import { type OperationsProcess, startOperationsProcess } from '../../src/ops/operations-process.js';
import { TestContext } from '../helpers/context.js';
import { childEnv, runTs } from '../helpers/spawn.js';

const t = new TestContext('confirm_operators');
let pool: pg.Pool;
let store: ConfirmationStore;
let queue: Queue;
let redis: ReturnType<TestContext['redis']>;
let n = 0;

const QUEUE = 'refunds';
const newToken = () => `bqi_op_${randomBytes(32).toString('base64url')}`;
const sha256 = (token: string) => createHash('sha256').update(token).digest('hex');
const entry = (actor: string, namespaces: string, token: string) =>
  `actor=${actor};namespaces=${namespaces};sha256=${sha256(token)}`;

const alice = newToken(); // acme/payments.* only
const bob = newToken(); // acme/refunds.issue only
const root = newToken(); // every namespace, an e-mail address as its actor

function request(namespace: string, over: Partial<NewConfirmation> = {}): NewConfirmation {
  n++;
  return {
    operationKey: `${encodeURIComponent(namespace)}:${encodeURIComponent(`order:o-${n}`)}:v1`,
    name: 'large-refund',
    operation: 'payments.refund',
    reason: `refund 5000 cents for order o-${n}`,
    onTimeout: 'deny',
    timeoutMs: 3_600_000,
    taskId: `task-${n}`,
    jobId: `job-${n}`,
    queue: QUEUE,
    epoch: 1,
    ...over,
  };
}

/** A request whose job is parked in BullMQ's delayed set, as `ctx.confirm()` leaves it. */
async function parked(namespace: string) {
  const c = await store.request(request(namespace));
  const job = await queue.add('refund', { n }, { jobId: c.jobId as string, delay: 3_600_000 });
  await store.addWaiter(c.id, { queue: QUEUE, jobId: job.id as string });
  return { c, job };
}

const baseEnv = () => ({
  DATABASE_URL: t.databaseUrl,
  REDIS_URL: t.redisUrl,
  BQI_SCHEMA: t.schema,
  BQI_PREFIX: t.prefix,
  BQI_AUDIT_QUEUE: 'audit-operators',
  BQI_HTTP_PORT: '0',
  BQI_HTTP_HOST: '127.0.0.1',
  LOG_LEVEL: 'silent',
});

async function start(operators: string[]): Promise<{ ops: OperationsProcess; url: string }> {
  const ops = await startOperationsProcess(loadConfig({ ...baseEnv(), BQI_OPERATORS: operators.join('\n') }));
  return { ops, url: `http://127.0.0.1:${ops.http?.address?.port}/confirmations` };
}

const call = (url: string, token: string | undefined, body?: unknown) =>
  fetch(url, {
    method: body === undefined ? 'GET' : 'POST',
    headers: {
      ...(token ? { authorization: `Bearer ${token}` } : {}),
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });

async function json(res: Response): Promise<Record<string, unknown>> {
  return (await res.json()) as Record<string, unknown>;
}

async function answerEvents(c: { id: string }) {
  return (
    await t.query(
      `select actor_type, actor_id, decision from ${t.schema}.audit_events
       where resource_id = $1 and action = 'confirmation.answer'`,
      [c.id],
    )
  ).rows;
}

beforeAll(async () => {
  await t.setup();
  pool = t.pool();
  store = new ConfirmationStore(pool, t.schema);
  redis = t.redis();
  queue = new Queue(QUEUE, { connection: redis, prefix: t.prefix });
});
afterAll(async () => {
  await queue.close();
  await redis.quit();
  if (redis.status !== 'end') await new Promise((resolve) => redis.once('end', resolve));
  await pool.end();
  await t.teardown();
});

describe('operator tokens (BQI_OPERATORS)', () => {
  let ops: OperationsProcess;
  let url: string;
  beforeAll(async () => {
    ({ ops, url } = await start([
      entry('alice', 'acme/payments.*', alice),
      entry('bob', 'acme/refunds.issue', bob),
      entry('root@example.com', '*', root),
    ]));
  });
  afterAll(async () => {
    await ops.close();
  });

  it("a token scoped to one namespace answering another namespace's request: 403, nothing answered, nothing woken", async () => {
    const { c, job } = await parked('acme/refunds.issue');
    const res = await call(`${url}/${c.id}`, alice, { decision: 'approve', reason: 'looks fine' });
    expect(res.status).toBe(403);
    expect((await json(res)).code).toBe('NAMESPACE_NOT_ALLOWED');
    expect(await store.get(c.id)).toMatchObject({ status: 'pending', answeredBy: null });
    expect(await answerEvents(c)).toEqual([]);
    expect(await job.isDelayed()).toBe(true);
    // Not shown to it either, one by one or in the list.
    expect((await call(`${url}/${c.id}`, alice)).status).toBe(403);
    const listed = (await json(await call(`${url}?pending=true`, alice))).confirmations as { id: string }[];
    expect(listed.map((x) => x.id)).not.toContain(c.id);

    // The operator of that namespace answers it, and the job wakes: the 403 above was the scope.
    const ok = await call(`${url}/${c.id}`, bob, { decision: 'approve', reason: 'checked' });
    expect(ok.status).toBe(200);
    expect(await json(ok)).toMatchObject({ recorded: true, woken: 1, confirmation: { answeredBy: 'bob' } });
    expect(await job.isDelayed()).toBe(false);
  });

  it("the actor is the credential's: a body that names one is refused (400) and nothing is recorded; without, the token's actor is stored, served and audited", async () => {
    const c = await store.request(request('acme/payments.refund'));
    const claimed = await call(`${url}/${c.id}`, alice, { decision: 'deny', actor: 'mallory', reason: 'x' });
    expect(claimed.status).toBe(400);
    expect((await json(claimed)).code).toBe('ACTOR_NOT_ACCEPTED');
    const self = await call(`${url}/${c.id}`, alice, { decision: 'deny', actor: 'alice', reason: 'x' });
    expect(self.status).toBe(400);
    expect((await store.get(c.id)).status).toBe('pending');

    const ok = await call(`${url}/${c.id}`, alice, { decision: 'deny', reason: 'over the limit' });
    expect(ok.status).toBe(200);
    expect((await store.get(c.id)).answeredBy).toBe('alice');
    expect(await answerEvents(c)).toEqual([{ actor_type: 'user', actor_id: 'alice', decision: 'deny' }]);
    const served = (await json(await call(`${url}/${c.id}`, root))).confirmation as {
      answeredBy: string;
    };
    expect(served.answeredBy).toBe('alice');
  });

  it('two operators with distinct tokens: each answer is recorded under its own token', async () => {
    const a = await store.request(request('acme/payments.charge'));
    const b = await store.request(request('acme/refunds.issue'));
    expect((await call(`${url}/${a.id}`, alice, { decision: 'approve', reason: 'ok' })).status).toBe(200);
    expect((await call(`${url}/${b.id}`, bob, { decision: 'approve', reason: 'ok' })).status).toBe(200);
    expect((await store.get(a.id)).answeredBy).toBe('alice');
    expect((await store.get(b.id)).answeredBy).toBe('bob');
    expect(await answerEvents(a)).toEqual([{ actor_type: 'user', actor_id: 'alice', decision: 'allow' }]);
    expect(await answerEvents(b)).toEqual([{ actor_type: 'user', actor_id: 'bob', decision: 'allow' }]);
  });

  it('near misses are refused (401) in constant time: the digest itself, a prefix, one character changed, no scheme', async () => {
    const c = await store.request(request('acme/payments.refund'));
    const last = alice.at(-1) === 'A' ? 'B' : 'A';
    for (const token of [sha256(alice), alice.slice(0, -1), `${alice.slice(0, -1)}${last}`, `${alice}x`, ' ']) {
      const res = await call(`${url}/${c.id}`, token, { decision: 'approve', reason: 'x' });
      expect(res.status).toBe(401);
      expect((await json(res)).code).toBe('UNAUTHORIZED');
    }
    const bare = await fetch(`${url}/${c.id}`, { headers: { authorization: alice } });
    expect(bare.status).toBe(401);
    expect((await store.get(c.id)).status).toBe('pending');
  });

  it('an actor that is personal data (an e-mail address) is stored, served and audited as the same keyed ref', async () => {
    const c = await store.request(request('acme/billing.close'));
    const ok = await call(`${url}/${c.id}`, root, { decision: 'approve', reason: 'fine' });
    expect(ok.status).toBe(200);
    const stored = (await store.get(c.id)).answeredBy as string;
    expect(stored).toMatch(/^hmac:/);
    expect(await answerEvents(c)).toEqual([{ actor_type: 'user', actor_id: stored, decision: 'allow' }]);
    const one = await (await call(`${url}/${c.id}`, root)).text();
    const all = await (await call(url, root)).text();
    for (const text of [one, all]) {
      expect(text).toContain(stored);
      expect(text).not.toContain('example.com');
    }
    // A request answered before actors were stored so is served the same way.
    const old = await store.request(request('acme/billing.close'));
    await t.query(
      `update ${t.schema}.idempotency_confirmations set status = 'approved', answered_at = now(),
         answered_by = 'carol@example.com', answered_by_type = 'user' where n = $1`,
      [old.id.slice(3)],
    );
    const served = await (await call(`${url}/${old.id}`, root)).text();
    expect(served).not.toContain('example.com');
    expect(JSON.parse(served).confirmation.answeredBy).toMatch(/^hmac:/);
  });
});

describe('revoking', () => {
  it('a token whose entry is removed is refused (401) after the restart; the others still answer', async () => {
    const c = await store.request(request('acme/refunds.issue'));
    const before = await start([entry('alice', 'acme/payments.*', alice), entry('bob', 'acme/refunds.issue', bob)]);
    try {
      expect((await call(before.url, bob)).status).toBe(200);
    } finally {
      await before.ops.close();
    }
    const after = await start([entry('alice', 'acme/payments.*', alice)]);
    try {
      const res = await call(`${after.url}/${c.id}`, bob, { decision: 'approve', reason: 'x' });
      expect(res.status).toBe(401);
      expect((await store.get(c.id)).status).toBe('pending');
      expect((await call(after.url, alice)).status).toBe(200);
    } finally {
      await after.ops.close();
    }
  });
});

describe('configuring operators', () => {
  it('`operators token` prints a token once and an entry holding only its SHA-256, which BQI_OPERATORS takes', async () => {
    const run = await runTs(
      'src/cli/main.ts',
      ['operators', 'token', '--actor', 'dana', '--namespaces', 'acme/payments.*,acme/refunds.issue', '--json'],
      childEnv({}),
      120_000,
    );
    expect(run.code).toBe(0);
    const made = JSON.parse(run.stdout) as { token: string; entry: string };
    expect(made.token).toMatch(/^bqi_op_[A-Za-z0-9_-]{43}$/);
    expect(made.entry).toBe(`actor=dana;namespaces=acme/payments.*,acme/refunds.issue;sha256=${sha256(made.token)}`);
    expect(made.entry).not.toContain(made.token.slice(7));
    expect(loadConfig({ ...baseEnv(), BQI_OPERATORS: made.entry }).operators).toEqual([
      { actor: 'dana', namespaces: ['acme/payments.*', 'acme/refunds.issue'], sha256: sha256(made.token) },
    ]);
    const refused = await runTs(
      'src/cli/main.ts',
      ['operators', 'token', '--actor', 'dana smith', '--namespaces', 'acme/*'],
      childEnv({}),
      120_000,
    );
    expect(refused.code).toBe(2);
    expect(refused.stdout).toBe('');
  }, 240_000);

  it('a malformed entry is a configuration error naming the entry by position, never its digest', () => {
    const good = entry('alice', 'acme/payments.*', alice);
    const cases = [
      `${good} actor=bob;namespaces=acme/x;sha256=${sha256(bob).slice(1)}`,
      `${good} actor=bob;sha256=${sha256(bob)}`,
      `${good} actor=bob;namespaces=acme/*x;sha256=${sha256(bob)}`,
      `${good} ${good}`,
      `${good} actor=bob;namespaces=*;sha256=${sha256(bob)};token=${bob}`,
    ];
    for (const text of cases) {
      let error: unknown;
      try {
        loadConfig({ ...baseEnv(), BQI_OPERATORS: text });
      } catch (err) {
        error = err;
      }
      expect(error).toMatchObject({ code: 'IDEMPOTENCY_ENV_CONFIG', details: { variables: ['BQI_OPERATORS'] } });
      expect((error as Error).message).toMatch(/entry 2/);
      expect((error as Error).message).not.toContain(sha256(bob).slice(1, 20));
      expect((error as Error).message).not.toContain(bob);
    }
  });
});

describe('a refused answer', () => {
  it('is logged with the request and the actor as the trail tells it (a ref for an e-mail address), and changes nothing', async () => {
    const warnings: { obj: Record<string, unknown>; msg: string | undefined }[] = [];
    const quiet = () => {};
    const logger = {
      debug: quiet,
      info: quiet,
      error: quiet,
      warn: (obj: object, msg?: string) => warnings.push({ obj: obj as Record<string, unknown>, msg }),
    };
    const handle = confirmationHttpHandler({
      pool,
      schema: t.schema,
      operators: [{ actor: 'erin@example.com', namespaces: ['acme/payments.*'], sha256: sha256(alice) }],
      logger,
    });
    const server = createServer((req, res) => void handle(req, res));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const c = await store.request(request('acme/refunds.issue'));
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/confirmations/${c.id}`;
      const res = await call(url, alice, { decision: 'approve', reason: 'x' });
      expect(res.status).toBe(403);
      expect(warnings).toHaveLength(1);
      expect(warnings[0]?.obj).toMatchObject({ confirmation: c.id, operation: 'payments.refund' });
      expect(String(warnings[0]?.obj.actor)).toMatch(/^hmac:/);
      expect(JSON.stringify(warnings)).not.toContain('example.com');
      expect(await store.get(c.id)).toMatchObject({ status: 'pending' });
    } finally {
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});
