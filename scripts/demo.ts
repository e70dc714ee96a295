/**
 * `npm run demo`: side-effecting BullMQ jobs against a local downstream that counts commits,
 * with the faults BullMQ users meet: duplicate adds, lost responses, a changed input, a killed
 * worker, and many workers racing for one operation. Prints, per scenario, the intents, the
 * downstream commits and the ledger state; then the audit side: the timeline of one task, an
 * audit backfill restoring deleted events, and what an operator runs for the `unknown` operation.
 * Exits non-zero if commits ever exceed intents.
 *
 * `--keep` leaves the run's schema and queues in place and prints how to reach them with the CLI;
 * `--clean <id>` removes what a kept run left; `--clean` alone lists every run's data and removes
 * what runs no longer in progress left. SIGINT or SIGTERM ends the demo's processes and removes
 * the run's data (scripts/demo-signals.ts).
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { isDeepStrictEqual } from 'node:util';
import type { Job, Queue, Worker } from 'bullmq';
import { AuditStore, createAuditWriter, renderTimeline, timeline } from '../src/entries/audit.js';
import { migrate, PostgresLedger, relayIntents } from '../src/entries/ledger.js';
import { answerConfirmation, listConfirmations } from '../src/entries/ops.js';
import { type IdempotentProcessor, parseKeyringSpec, unseal, withIdempotency } from '../src/index.js';
import { openQueue, openWorker } from '../src/shared/queue-backend.js';
import { postEffect, startCommitCounter } from '../src/testing/index.js';
import { auditWritten, showBackfill } from './demo-audit.js';
import {
  demoConnection,
  demoPlace,
  demoPrefix,
  loseJobs,
  queueStore,
  recordsHolding,
  removeDemoData,
} from './demo-data.js';
import {
  type ChargeInput,
  type ChargeOperation,
  type ChargeResult,
  chargeOperation,
  chargeProcessor,
  confirmedChargeProcessor,
  DEMO_AUDIT_QUEUE,
  DEMO_CONFIRM_TASK,
  DEMO_TASK,
  DEMO_WORKER_TIMING,
  demoAuditEmitter,
  demoPolicy,
} from './demo-operation.js';
import { CONFIRMATION_INTRO, cliLine, LEGEND, type Row, TIMELINE_INTRO, table, trailLine } from './demo-report.js';
import { cleanLeftovers, interruptible } from './demo-signals.js';
import { services } from './services.js';

const USAGE = 'usage: npm run demo [-- --keep | -- --clean [<id>]]';
const args = process.argv.slice(2);
const keep = args.includes('--keep');
if (args[0] === '--clean' && args.length === 1) {
  const svc = await services();
  for (const line of await cleanLeftovers(svc.databaseUrl, svc.redisUrl)) console.log(line);
  await svc.stop();
  process.exit(0);
}
if (args[0] === '--clean') {
  const place = demoPlace(args[1] ?? '');
  const svc = await services({ embedded: true });
  await removeDemoData(place, svc.databaseUrl, svc.redisUrl);
  await svc.stop();
  console.log(`removed schema ${place.schema} and the queues under ${demoPrefix(place, svc.redisUrl)}`);
  process.exit(0);
}
if (args.some((a) => a !== '--keep')) {
  process.stderr.write(`${USAGE}\n`);
  process.exit(2);
}

const svc = await services({ embedded: true });
const place = demoPlace(randomBytes(3).toString('hex'));
const { schema } = place;
const prefix = demoPrefix(place, svc.redisUrl);
const closers: (() => Promise<unknown>)[] = [];
// From here a signal ends the demo's processes and removes this run's data.
const run = await interruptible({
  place,
  databaseUrl: svc.databaseUrl,
  redisUrl: svc.redisUrl,
  stopServices: () => svc.stop(),
  closers: () => [...closers, () => ds.close(), () => ledger.close()],
});
process.stderr.write(`run ${place.id}: schema ${schema}, queues under ${prefix}\n`);
const connection = demoConnection(svc.redisUrl, prefix);
await migrate({ connectionString: svc.databaseUrl, schema });
const ledger = new PostgresLedger({ connectionString: svc.databaseUrl, schema });
const ds = await startCommitCounter();
// What the ledger and BullMQ keep is sealed with this key; a real deployment configures its own.
const ownKeyring = process.env.BQI_KEYRING;
const keyringSpec = ownKeyring ?? `demo:base64:${randomBytes(32).toString('base64')}`;
const keyring = parseKeyringSpec(keyringSpec);
const auditQueue = openQueue(DEMO_AUDIT_QUEUE, { connection, prefix });
const audit = demoAuditEmitter(auditQueue, ledger.pool, schema, keyring, 'demo-worker-1');
const writer = createAuditWriter({
  connection,
  prefix,
  pool: ledger.pool,
  schema,
  redactionPolicy: demoPolicy(keyring),
});
writer.on('error', () => {});
closers.push(
  () => audit.close(),
  () => writer.close(),
  () => auditQueue.close(),
);
const rows: Row[] = [];
let qn = 0;

function queue(): Queue {
  const q = openQueue(`charges-${++qn}`, { connection, prefix });
  closers.push(() => q.close());
  return q;
}

function worker(q: Queue, processor: (job: Job) => Promise<unknown>, concurrency = 5): Worker {
  const w = openWorker(q.name, processor, { connection, prefix, concurrency, ...DEMO_WORKER_TIMING });
  w.on('error', () => {});
  closers.unshift(() => w.close());
  return w;
}

/** The demo's options of `withIdempotency`: its ledger, keyring and audit trail. */
function wrap(op: ChargeOperation, processor: IdempotentProcessor<ChargeInput, ChargeResult>) {
  return withIdempotency(op, processor, { ledger, keyring, audit, worker: DEMO_WORKER_TIMING });
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

/** Polls `look` until it returns a value. */
async function until<T>(look: () => Promise<T | undefined>, what: string, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const found = await look();
    if (found !== undefined) return found;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
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

async function scenario(name: string, run: () => Promise<Omit<Row, 'scenario' | 'commits'>>): Promise<void> {
  const before = ds.commits;
  const r = await run();
  rows.push({ scenario: name, ...r, commits: ds.commits - before });
  process.stderr.write(`  ✓ ${name}\n`);
}

/**
 * The worker that will be killed runs in a process of its own, started now: its start-up (seconds
 * on a busy machine) overlaps the first scenarios. It says `ready`, then `committed`.
 */
function startDoomedWorker() {
  const q = queue();
  // Run as TypeScript (npm run demo) or as transpiled JavaScript (the tests' child build): the
  // worker file is this one's sibling either way.
  const js = import.meta.url.endsWith('.js');
  const file = fileURLToPath(new URL(`./demo-worker.${js ? 'js' : 'ts'}`, import.meta.url));
  const child = spawn(
    process.execPath,
    [
      ...(js ? [] : ['--import', 'tsx']),
      file,
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
  run.children.add(child);
  closers.push(async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  const waiting = new Map<string, () => void>();
  createInterface({ input: child.stdout! }).on('line', (l) => waiting.get(l)?.());
  const said = (word: string) =>
    new Promise<void>((resolve, reject) => {
      waiting.set(word, resolve);
      child.once('exit', () => reject(new Error(`the demo's worker process exited before saying ${word}`)));
    });
  const ready = said('ready');
  const committed = said('committed');
  // Awaited later: a failure before then must not be an unhandled rejection.
  ready.catch(() => {});
  committed.catch(() => {});
  return { queue: q, child, ready, committed };
}
const doomed = startDoomedWorker();

/** What the audit side of the demo found, printed after the table. */
const told: {
  unknownKey?: string;
  unknownCharge?: string | undefined;
  timeline?: string;
  backfill?: string[];
  confirmation?: string;
  confirmationTrail?: string;
} = {};

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
    worker(q, wrap(idem, chargeProcessor(ds.url)));
    const done = await Promise.all([...new Set(jobs.map((j) => j.jobId))].map((jid) => finished(q, jid)));
    return {
      intents: 1,
      ledger: await ledgerState(jobs[0]!.key),
      outcome: `5 adds → ${done.length} jobs: ${outcome(done)}`,
    };
  });

  await scenario('lost response, downstream honours the key', async () => {
    const q = queue();
    worker(q, wrap(idem, chargeProcessor(ds.url)));
    ds.failNext('commit-then-drop'); // commits, then the connection drops before the reply
    const { jobId, key } = await idem.enqueue(
      q,
      { order: 'B-200', amount: 990 },
      { jobOptions: { attempts: 3, backoff: 100 } },
    );
    const job = await finished(q, jobId);
    return {
      intents: 1,
      ledger: await ledgerState(key),
      outcome: `${outcome([job])} after ${job.job.attemptsMade} attempts`,
    };
  });

  await scenario('lost response, downstream has no idempotent API', async () => {
    const q = queue();
    worker(q, wrap(none, chargeProcessor(ds.url)));
    ds.failNext('commit-then-drop');
    const { jobId, key, idempotencyKey } = await none.enqueue(
      q,
      { order: 'C-300', amount: 450 },
      { jobOptions: { attempts: 3, backoff: 100 } },
    );
    const job = await finished(q, jobId);
    told.unknownKey = idempotencyKey;
    told.unknownCharge = ds.effectsFor({ order: 'C-300' })[0]?.id;
    return { intents: 1, ledger: await ledgerState(key), outcome: `${outcome([job])}: held for an operator` };
  });

  await scenario('same key, changed amount', async () => {
    const q = queue();
    // Both are queued before a worker of concurrency 1 starts: the original is taken first.
    const first = await q.add('charge', { order: 'D-400', amount: 700 });
    const changed = await q.add('charge', { order: 'D-400', amount: 70_000 });
    worker(q, wrap(idem, chargeProcessor(ds.url)), 1);
    const done = [await finished(q, first.id as string), await finished(q, changed.id as string)];
    const key = idem.keyFor(idem.parseInput({ order: 'D-400', amount: 700 }));
    return {
      intents: 1,
      ledger: await ledgerState(key),
      outcome: `original ${outcome(done.slice(0, 1))}; changed ${outcome(done.slice(1))}`,
    };
  });

  await scenario('worker killed after the downstream committed', async () => {
    const q = doomed.queue;
    await doomed.ready;
    ds.failNext('error-500'); // its first attempt finds the downstream down: nothing commits, BullMQ retries
    const { jobId, key } = await idem.enqueue(
      q,
      { order: 'E-500', amount: 3100 },
      { taskId: DEMO_TASK, jobOptions: { attempts: 3, backoff: 100 } },
    );
    await doomed.committed;
    doomed.child.kill('SIGKILL'); // dies holding the lease, before recording the completion
    worker(q, wrap(idem, chargeProcessor(ds.url, true)));
    const job = await finished(q, jobId);
    // The same job sent once more (a webhook replay): it finds the key completed.
    const copy = await q.add('charge', job.job.data);
    const replay = await finished(q, copy.id as string);
    return {
      intents: 1,
      ledger: await ledgerState(key),
      outcome: `${outcome([job])} (a 500, then killed: taken over); its copy: ${outcome([replay]).split(' ')[0]}, replayed`,
    };
  });

  await scenario('50 jobs for 1 intent across 3 workers', async () => {
    const q = queue();
    for (let i = 0; i < 3; i++) worker(q, wrap(idem, chargeProcessor(ds.url)), 10);
    const added = await q.addBulk(
      Array.from({ length: 50 }, (_, i) => ({
        name: 'charge',
        data: { order: 'F-600', amount: 5, note: `copy ${i}` },
      })),
    );
    const done = await Promise.all(added.map((j) => finished(q, j.id as string)));
    const key = idem.keyFor(idem.parseInput({ order: 'F-600', amount: 5 }));
    return { intents: 1, ledger: await ledgerState(key), outcome: outcome(done) };
  });

  await scenario('sealed result, replayed exactly', async () => {
    const q = queue();
    const token = `rcpt_${randomBytes(12).toString('hex')}`;
    let returned: unknown;
    worker(
      q,
      wrap(idem, async (input, ctx) => {
        const res = await postEffect<{ id: string }>(ds.url, input, ctx.idempotencyKey, ctx.signal);
        returned = { chargeId: res.body.id, receiptToken: token };
        return returned as { chargeId: string; receiptToken: string };
      }),
    );
    const { jobId, key } = await idem.enqueue(q, { order: 'G-700', amount: 2500 });
    const first = await finished(q, jobId);
    const again = await q.add('charge', { order: 'G-700', amount: 2500, note: 'replay' });
    const replay = await finished(q, again.id as string);
    const exact = [first, replay].every((f) => isDeepStrictEqual(unseal(f.job.returnvalue, keyring), returned));
    const inRedis = await recordsHolding(svc.redisUrl, prefix, token);
    const row = await ledger.get(key);
    const inPostgres = JSON.stringify(row).includes(token) ? 1 : 0;
    return {
      intents: 1,
      ledger: await ledgerState(key),
      outcome: `${outcome([first, replay])}; unsealed = returned: ${exact}; token in ${queueStore(svc.redisUrl) === 'Redis' ? 'Redis keys' : queueStore(svc.redisUrl)}: ${inRedis}, in the ledger: ${inPostgres}`,
    };
  });

  await scenario('large charge, approved by an operator', async () => {
    const q = queue();
    worker(q, wrap(idem, confirmedChargeProcessor(ds.url)));
    const order = 'H-800';
    const { jobId, key } = await idem.enqueue(q, { order, amount: 250_000 }, { taskId: DEMO_CONFIRM_TASK });
    // The job asks, gives its lease back and waits in BullMQ's delayed set: nothing is charged yet.
    const request = await until(async () => {
      const [c] = await listConfirmations({ pool: ledger.pool, schema, pending: true });
      if (!c || c.waiters.length === 0 || (await ledger.get(key))?.status !== 'released') return undefined;
      return (await q.getJobState(jobId)) === 'delayed' ? c : undefined;
    }, 'the large charge to wait for its confirmation');
    const chargedBefore = ds.effectsFor({ order }).length;
    // An operator says yes (the CLI's `confirm` runs the same function); the waiting job wakes at once.
    await answerConfirmation({
      pool: ledger.pool,
      schema,
      id: request.id,
      approve: true,
      actor: 'ops-alice',
      comment: 'invoice checked',
      auditStore: new AuditStore(ledger.pool, schema, demoPolicy(keyring)),
      queue: () => q,
    });
    const job = await finished(q, jobId);
    told.confirmation = request.id;
    return {
      intents: 1,
      ledger: await ledgerState(key),
      outcome: `${outcome([job])}; ${chargedBefore} charges before ${request.id} was approved by ops-alice`,
    };
  });

  // The audit side: every transition above, and the decisions, are in audit_events by now.
  await audit.flush();
  await auditWritten(auditQueue);
  const b = await showBackfill(ledger.pool, schema, auditQueue);
  told.backfill = [
    `Audit backfill: ${b.deleted} events deleted from audit_events on purpose (every completed and unknown`,
    `transition); runBackfill read ${b.rowsScanned} ledger rows and sent the ${b.eventsEnqueued} events they imply;`,
    `the writer stored ${b.restored} of them again (${b.sameIds ? 'the deleted ids exactly' : 'NOT the deleted ids'}), the other ${b.eventsEnqueued - b.restored} were there already.`,
  ];
  const t = await timeline({ taskId: DEMO_TASK }, { store: new AuditStore(ledger.pool, schema), ledger });
  told.timeline = renderTimeline(t);
  const c = await timeline({ taskId: DEMO_CONFIRM_TASK }, { store: new AuditStore(ledger.pool, schema), ledger });
  told.confirmationTrail = trailLine(c.events);

  // Last, after the audit side (whose backfill counts the rows above): an intent outlives Redis.
  await scenario('intents recorded, then Redis lost their jobs', async () => {
    const q = queue();
    const orders = ['J-901', 'J-902', 'J-903'];
    // Accepted in the business transaction (the transactional outbox): recorded in Postgres,
    // the jobs added by the relay once it committed.
    const client = await ledger.pool.connect();
    const accepted = [];
    try {
      await client.query('begin');
      for (const order of orders) {
        accepted.push(await idem.enqueue(q, { order, amount: 90 }, { durable: { tx: client, schema } }));
      }
      await client.query('commit');
    } finally {
      client.release();
    }
    const relay = () => relayIntents({ pool: ledger.pool, schema, queue: () => q, recheckAfterMs: 0 });
    await relay();
    // Redis loses every job before a worker claims one (a restart without persistence).
    const lost = await loseJobs(
      svc.redisUrl,
      q,
      accepted.map((a) => a.jobId),
    );
    const { readded } = await relay();
    worker(q, wrap(idem, chargeProcessor(ds.url)));
    const done = await Promise.all(accepted.map((a) => finished(q, a.jobId)));
    const states = new Set(await Promise.all(accepted.map((a) => ledgerState(a.key))));
    return {
      intents: orders.length,
      ledger: [...states].join(', '),
      outcome: `${lost} jobs deleted from ${queueStore(svc.redisUrl)} before a claim; ${readded} added again by the relay: ${done.filter((d) => d.state === 'completed').length}× ok`,
    };
  });
} finally {
  await run.settled(); // after a signal, its clean-up ends the process
  for (const close of closers) await close().catch(() => {});
  await ds.close();
  await ledger.close();
  if (!keep) await removeDemoData(place, svc.databaseUrl, svc.redisUrl);
  await run.done();
  await svc.stop();
}

console.log();
for (const l of table(rows)) console.log(l);
const over = rows.filter((r) => r.commits > r.intents);
console.log();
if (over.length > 0) {
  console.log(`FAIL: downstream commits exceeded intents in ${over.length} scenario(s)`);
  process.exit(1);
}
console.log(
  `OK: ${rows.reduce((n, r) => n + r.commits, 0)} commits for ${rows.reduce((n, r) => n + r.intents, 0)} intents; no side effect ran twice.`,
);
console.log();
for (const l of LEGEND) console.log(l);
console.log();
for (const l of TIMELINE_INTRO) console.log(l);
console.log();
console.log(told.timeline);
console.log();
for (const l of told.backfill ?? []) console.log(l);
console.log();
for (const l of CONFIRMATION_INTRO(told.confirmation ?? '?')) console.log(l);
console.log(told.confirmationTrail);
console.log();
const key = told.unknownKey as string;
console.log(
  `The unknown operation: the downstream did commit it (${told.unknownCharge}), but no worker can know that. An operator looks it up, then:`,
);
console.log(cliLine(`inspect '${key}'`));
console.log(
  cliLine(`resolve '${key}' --committed --result '{"chargeId":"${told.unknownCharge}"}' --reason "found downstream"`),
);
console.log(`  (or: resolve '${key}' --not-committed --reason "no such charge downstream": the next attempt runs it)`);
console.log();
if (!keep) {
  console.log(
    'The demo removed its data. `npm run demo -- --keep` keeps it, to run these commands and the others on it.',
  );
} else {
  const vars = [
    ...(process.env.DATABASE_URL ? [] : [`DATABASE_URL='${svc.databaseUrl}'`]),
    ...(process.env.REDIS_URL ? [] : [`REDIS_URL='${svc.redisUrl}'`]),
    `BQI_SCHEMA=${schema}`,
    `BQI_PREFIX='${prefix}'`,
    ...(ownKeyring ? [] : [`BQI_KEYRING='${keyringSpec}'`]),
  ];
  console.log(
    `Kept: schema ${schema}, queues under ${prefix}${ownKeyring ? ' (sealed with your BQI_KEYRING)' : ''}. To reach them:`,
  );
  console.log(`  export ${vars.join(' ')}`);
  console.log(cliLine('stats'));
  console.log(cliLine('list --status unknown'));
  console.log(cliLine(`timeline ${DEMO_TASK}`));
  console.log(`Remove it with: npm run demo -- --clean ${place.id}`);
  if (svc.containers) console.log('(the services ran in containers started for this run: they are gone with it)');
}
