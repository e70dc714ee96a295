/**
 * `npm run demo`: side-effecting BullMQ jobs against a local downstream that counts commits,
 * with the faults BullMQ users meet: duplicate adds, lost responses, a changed input, a killed
 * worker, and many workers racing for one operation. Prints, per scenario, the intents, the
 * downstream commits and the ledger state. Exits non-zero if commits ever exceed intents.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { isDeepStrictEqual } from 'node:util';
import { type Job, Queue, Worker } from 'bullmq';
import pg from 'pg';
import { migrate, PostgresLedger, parseKeyringSpec, RetryableError, unseal, withIdempotency } from '../src/index.js';
import { postEffect, startDownstream } from '../src/testing/downstream-stub.js';
import { chargeOperation, DEMO_WORKER_TIMING } from './demo-operation.js';
import { services } from './services.js';

type Row = { scenario: string; intents: number; commits: number; ledger: string; outcome: string };

const svc = await services();
const id = randomBytes(3).toString('hex');
const schema = `bqi_demo_${id}`;
const prefix = `{bqi-demo-${id}}`;
const connection = { url: svc.redisUrl, maxRetriesPerRequest: null };
await migrate({ connectionString: svc.databaseUrl, schema });
const ledger = new PostgresLedger({ connectionString: svc.databaseUrl, schema });
const ds = await startDownstream();
// What the ledger and BullMQ keep is sealed with this key; a real deployment configures its own.
const keyringSpec = process.env.BQI_KEYRING ?? `demo:base64:${randomBytes(32).toString('base64')}`;
const keyring = parseKeyringSpec(keyringSpec);
const closers: (() => Promise<unknown>)[] = [];
const rows: Row[] = [];
let qn = 0;

function charge(downstreamUrl = ds.url) {
  return async (input: { order: string; amount: number }, ctx: { idempotencyKey: string; signal: AbortSignal }) => {
    const res = await postEffect<{ id: string }>(downstreamUrl, input, ctx.idempotencyKey, ctx.signal);
    if (res.status >= 500) throw new RetryableError(`downstream answered ${res.status}`);
    return { chargeId: res.body.id };
  };
}

function queue(): Queue {
  const q = new Queue(`charges-${++qn}`, { connection, prefix });
  closers.push(() => q.close());
  return q;
}

function worker(q: Queue, processor: (job: Job) => Promise<unknown>, concurrency = 5): Worker {
  const w = new Worker(q.name, processor, { connection, prefix, concurrency, ...DEMO_WORKER_TIMING });
  w.on('error', () => {});
  closers.unshift(() => w.close());
  return w;
}

type Finished = { job: Job; state: 'completed' | 'failed' };

async function finished(q: Queue, jobId: string, timeoutMs = 30_000): Promise<Finished> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const state = await q.getJobState(jobId);
    if (state === 'completed' || state === 'failed') return { job: (await q.getJob(jobId)) as Job, state };
    if (Date.now() > deadline) throw new Error(`job ${jobId} did not finish (${state})`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function ledgerState(key: Parameters<PostgresLedger['get']>[0]): Promise<string> {
  const r = await ledger.get(key);
  return r ? `${r.status} (epoch ${r.epoch})` : 'absent';
}

function outcome(jobs: Finished[]): string {
  const by = new Map<string, number>();
  for (const { job: j, state } of jobs) {
    const k = state === 'failed' ? `failed: ${j.failedReason.split(':')[0]}` : `ok ${shown(j.returnvalue)}`;
    by.set(k, (by.get(k) ?? 0) + 1);
  }
  return [...by].map(([k, n]) => (n > 1 ? `${n}× ${k}` : k)).join('; ');
}

/** A sealed result as BullMQ shows it: the public fields, and the sealed part by its size. */
function shown(view: unknown): string {
  const { $sealed, ...clear } = view as { $sealed?: string };
  return JSON.stringify({ ...clear, ...($sealed ? { $sealed: `<${$sealed.length} chars>` } : {}) });
}

async function scenario(name: string, run: () => Promise<Omit<Row, 'scenario'>>): Promise<void> {
  const before = ds.commits;
  const r = await run();
  rows.push({ scenario: name, ...r, commits: ds.commits - before });
  process.stderr.write(`  ✓ ${name}\n`);
}

try {
  const idem = chargeOperation('idempotent');
  const none = chargeOperation('none');

  await scenario('duplicate adds: 1 intent enqueued 5 times', async () => {
    const q = queue();
    const jobs = [
      await idem.enqueue(q, { order: 'A-100', amount: 1200 }),
      await idem.enqueue(q, { order: 'A-100', amount: 1200 }),
    ];
    // An existing producer that knows nothing of keys adds the same intent 3 more times.
    for (const note of ['client retry', 'webhook replay', 'operator']) {
      const j = await q.add('charge', { order: 'A-100', amount: 1200, note });
      jobs.push({ ...jobs[0], jobId: j.id as string } as (typeof jobs)[0]);
    }
    worker(q, withIdempotency(idem, charge(), { ledger, keyring, worker: DEMO_WORKER_TIMING }));
    const done = await Promise.all([...new Set(jobs.map((j) => j.jobId))].map((jid) => finished(q, jid)));
    return {
      intents: 1,
      commits: 0,
      ledger: await ledgerState(jobs[0]!.key),
      outcome: `5 adds → ${done.length} jobs: ${outcome(done)}`,
    };
  });

  await scenario('lost response, downstream honours the key', async () => {
    const q = queue();
    worker(q, withIdempotency(idem, charge(), { ledger, keyring, worker: DEMO_WORKER_TIMING }));
    ds.failNext('commit-then-drop'); // commits, then the connection drops before the reply
    const { jobId, key } = await idem.enqueue(
      q,
      { order: 'B-200', amount: 990 },
      { jobOptions: { attempts: 3, backoff: 100 } },
    );
    const job = await finished(q, jobId);
    return {
      intents: 1,
      commits: 0,
      ledger: await ledgerState(key),
      outcome: `${outcome([job])} after ${job.job.attemptsMade} attempts`,
    };
  });

  await scenario('lost response, downstream has no idempotent API', async () => {
    const q = queue();
    worker(q, withIdempotency(none, charge(), { ledger, keyring, worker: DEMO_WORKER_TIMING }));
    ds.failNext('commit-then-drop');
    const { jobId, key } = await none.enqueue(
      q,
      { order: 'C-300', amount: 450 },
      { jobOptions: { attempts: 3, backoff: 100 } },
    );
    const job = await finished(q, jobId);
    return {
      intents: 1,
      commits: 0,
      ledger: await ledgerState(key),
      outcome: `${outcome([job])}: held for an operator`,
    };
  });

  await scenario('same key, changed amount', async () => {
    const q = queue();
    worker(q, withIdempotency(idem, charge(), { ledger, keyring, worker: DEMO_WORKER_TIMING }));
    const first = await q.add('charge', { order: 'D-400', amount: 700 });
    const changed = await q.add('charge', { order: 'D-400', amount: 70_000 });
    const done = [await finished(q, first.id as string), await finished(q, changed.id as string)];
    const key = idem.keyFor(idem.parseInput({ order: 'D-400', amount: 700 }));
    return { intents: 1, commits: 0, ledger: await ledgerState(key), outcome: outcome(done) };
  });

  await scenario('worker killed after the downstream committed', async () => {
    const q = queue();
    const child = spawn(
      process.execPath,
      [
        '--import',
        'tsx',
        fileURLToPath(new URL('./demo-worker.ts', import.meta.url)),
        JSON.stringify({
          databaseUrl: svc.databaseUrl,
          redisUrl: svc.redisUrl,
          schema,
          prefix,
          queue: q.name,
          downstreamUrl: ds.url,
        }),
      ],
      { stdio: ['pipe', 'pipe', 'inherit'], env: { ...process.env, BQI_KEYRING: keyringSpec } },
    );
    const committed = new Promise<void>((resolve, reject) => {
      createInterface({ input: child.stdout! }).on('line', (l) => l === 'committed' && resolve());
      child.once('exit', () => reject(new Error('demo worker exited early')));
    });
    const { jobId, key } = await idem.enqueue(q, { order: 'E-500', amount: 3100 });
    await committed;
    child.kill('SIGKILL'); // dies holding the lease, before recording the completion
    worker(q, withIdempotency(idem, charge(), { ledger, keyring, worker: DEMO_WORKER_TIMING }));
    const job = await finished(q, jobId);
    return {
      intents: 1,
      commits: 0,
      ledger: await ledgerState(key),
      outcome: `${outcome([job])} (stalled, taken over)`,
    };
  });

  await scenario('50 jobs for 1 intent across 3 workers', async () => {
    const q = queue();
    for (let i = 0; i < 3; i++)
      worker(q, withIdempotency(idem, charge(), { ledger, keyring, worker: DEMO_WORKER_TIMING }), 10);
    const added = await q.addBulk(
      Array.from({ length: 50 }, (_, i) => ({
        name: 'charge',
        data: { order: 'F-600', amount: 5, note: `copy ${i}` },
      })),
    );
    const done = await Promise.all(added.map((j) => finished(q, j.id as string)));
    const key = idem.keyFor(idem.parseInput({ order: 'F-600', amount: 5 }));
    return { intents: 1, commits: 0, ledger: await ledgerState(key), outcome: outcome(done) };
  });

  await scenario('sealed result, replayed exactly', async () => {
    const q = queue();
    const token = `rcpt_${randomBytes(12).toString('hex')}`;
    let returned: unknown;
    worker(
      q,
      withIdempotency(
        idem,
        async (input, ctx) => {
          const res = await postEffect<{ id: string }>(ds.url, input, ctx.idempotencyKey, ctx.signal);
          returned = { chargeId: res.body.id, receiptToken: token };
          return returned as { chargeId: string; receiptToken: string };
        },
        { ledger, keyring, worker: DEMO_WORKER_TIMING },
      ),
    );
    const { jobId, key } = await idem.enqueue(q, { order: 'G-700', amount: 2500 });
    const first = await finished(q, jobId);
    const again = await q.add('charge', { order: 'G-700', amount: 2500, note: 'replay' });
    const replay = await finished(q, again.id as string);
    const exact = [first, replay].every((f) => isDeepStrictEqual(unseal(f.job.returnvalue, keyring), returned));
    const { Redis } = await import('ioredis');
    const redis = new Redis(svc.redisUrl);
    let inRedis = 0;
    for (const k of await redis.keys(`${prefix}*`)) {
      const type = await redis.type(k);
      const dump =
        type === 'hash' ? JSON.stringify(await redis.hgetall(k)) : type === 'string' ? await redis.get(k) : '';
      if (dump?.includes(token)) inRedis++;
    }
    await redis.quit();
    const row = await ledger.get(key);
    const inPostgres = JSON.stringify(row).includes(token) ? 1 : 0;
    return {
      intents: 1,
      commits: 0,
      ledger: await ledgerState(key),
      outcome: `${outcome([first, replay])}; unsealed = returned: ${exact}; token in Redis keys: ${inRedis}, in the ledger: ${inPostgres}`,
    };
  });
} finally {
  for (const close of closers) await close().catch(() => {});
  await ds.close();
  await ledger.close();
  const admin = new pg.Client({ connectionString: svc.databaseUrl });
  await admin.connect();
  await admin.query(`drop schema if exists ${schema} cascade`);
  await admin.end();
  const { Redis } = await import('ioredis');
  const redis = new Redis(svc.redisUrl);
  const keys = await redis.keys(`${prefix}*`);
  if (keys.length) await redis.del(...keys);
  await redis.quit();
  await svc.stop();
}

const header: Row = { scenario: 'scenario', intents: 0, commits: 0, ledger: 'ledger', outcome: 'jobs' };
const w = {
  scenario: Math.max(...rows.map((r) => r.scenario.length), 8),
  ledger: Math.max(...rows.map((r) => r.ledger.length), 6),
};
const line = (r: Row, head = false) =>
  `${r.scenario.padEnd(w.scenario)}  ${(head ? 'intents' : String(r.intents)).padStart(7)}  ${(head ? 'commits' : String(r.commits)).padStart(7)}  ${r.ledger.padEnd(w.ledger)}  ${r.outcome}`;
console.log();
console.log(line(header, true));
console.log('-'.repeat(w.scenario + w.ledger + 40));
for (const r of rows) console.log(line(r));
const over = rows.filter((r) => r.commits > r.intents);
console.log();
if (over.length > 0) {
  console.log(`FAIL: downstream commits exceeded intents in ${over.length} scenario(s)`);
  process.exit(1);
}
console.log(
  `OK: ${rows.reduce((n, r) => n + r.commits, 0)} commits for ${rows.reduce((n, r) => n + r.intents, 0)} intents; no side effect ran twice.`,
);
