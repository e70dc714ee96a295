/**
 * The console's world for tests: an operations process (in this process) with the console on,
 * real BullMQ workers running the demo's charge operations against a commit-counting downstream,
 * an `unknown` charge (the downstream committed, the response was lost, the downstream has no
 * idempotent API) and a large charge waiting for a person's yes. Plus a small HTTP client that
 * signs in and posts the console's forms as a browser would.
 */
import { createHash, randomBytes } from 'node:crypto';
import { type Job, Queue, Worker } from 'bullmq';
import { chargeOperation, chargeProcessor, confirmedChargeProcessor } from '../../scripts/demo-operation.js';
import { AuditEmitter } from '../../src/audit/emitter.js';
import { auditRedactor } from '../../src/audit/redact-event.js';
import { auditPolicyFor } from '../../src/config/audit-policy.js';
import { loadConfig } from '../../src/config/env.js';
import { listConfirmations } from '../../src/confirm/answer.js';
import type { Confirmation } from '../../src/confirm/types.js';
import type { PostgresLedger } from '../../src/ledger/postgres-ledger.js';
import { type OperationsProcess, startOperationsProcess } from '../../src/ops/operations-process.js';
import { parseKeyringSpec } from '../../src/sealing/keyring.js';
import { type CommitCountingServer, startCommitCounter } from '../../src/testing/commit-counter.js';
import { withIdempotency } from '../../src/worker/with-idempotency.js';
import { type TestContext, waitFor } from './context.js';
import { TEST_KEYRING_SPEC } from './keyring.js';

/** A secret in every job's input and in the result an operator resolves: it must reach no page. */
export const CANARY = `canary-${randomBytes(8).toString('hex')}`;
export const AUDIT_QUEUE = 'console-audit';
const TIMING = { lockDuration: 2_000, stalledInterval: 1_000, maxStalledCount: 1 };

const newToken = () => `bqi_op_${randomBytes(32).toString('base64url')}`;
const sha256 = (token: string) => createHash('sha256').update(token).digest('hex');

/** alice: the demo's namespaces, may open sealed values; carol: another namespace only. */
export const TOKENS = { alice: newToken(), carol: newToken() };

export type ConsoleWorld = {
  ops: OperationsProcess;
  url: string;
  ds: CommitCountingServer;
  ledger: PostgresLedger;
  confirmQueue: Queue;
  unknownKey: string;
  confirmation: Confirmation;
  confirmJobId: string;
  close(): Promise<void>;
};

async function finished(q: Queue, jobId: string): Promise<Job> {
  return (await waitFor<Job | undefined>(
    async () => {
      const state = await q.getJobState(jobId);
      return state === 'completed' || state === 'failed' ? ((await q.getJob(jobId)) as Job) : undefined;
    },
    `job ${jobId} to finish`,
    60_000,
  )) as Job;
}

export async function startConsoleWorld(t: TestContext): Promise<ConsoleWorld> {
  const keyring = parseKeyringSpec(TEST_KEYRING_SPEC);
  const policy = auditPolicyFor(keyring);
  const idem = chargeOperation('idempotent');
  const none = chargeOperation('none');
  const ops = await startOperationsProcess(
    loadConfig({
      DATABASE_URL: t.databaseUrl,
      REDIS_URL: t.redisUrl,
      BQI_SCHEMA: t.schema,
      BQI_PREFIX: t.prefix,
      BQI_AUDIT_QUEUE: AUDIT_QUEUE,
      BQI_HTTP_PORT: '0',
      BQI_KEYRING: TEST_KEYRING_SPEC,
      BQI_CONSOLE: 'on',
      BQI_CONSOLE_DECRYPT: 'alice',
      BQI_OPERATORS: [
        `actor=alice;namespaces=demo/*;sha256=${sha256(TOKENS.alice)}`,
        `actor=carol;namespaces=acme/*;sha256=${sha256(TOKENS.carol)}`,
      ].join('\n'),
      LOG_LEVEL: 'silent',
    }),
    { console: { operations: [idem, none] } },
  );
  const ds = await startCommitCounter();
  const ledger = t.ledger();
  const connection = { url: t.redisUrl, maxRetriesPerRequest: null };
  const prefix = t.prefix;
  const auditQueue = new Queue(AUDIT_QUEUE, { connection, prefix });
  const audit = new AuditEmitter({
    queue: auditQueue,
    pool: ledger.pool,
    schema: t.schema,
    redact: auditRedactor(policy),
    redactionPolicy: policy,
    actorId: 'charge-worker',
  });
  const noneQueue = new Queue('charges-none', { connection, prefix });
  const confirmQueue = new Queue('charges-large', { connection, prefix });
  const wrap = (op: typeof idem, p: ReturnType<typeof chargeProcessor>) =>
    withIdempotency(op, p, { ledger, keyring, audit, worker: TIMING });
  const workers = [
    new Worker(noneQueue.name, wrap(none, chargeProcessor(ds.url)), { connection, prefix, ...TIMING }),
    new Worker(confirmQueue.name, wrap(idem, confirmedChargeProcessor(ds.url)), { connection, prefix, ...TIMING }),
  ];
  for (const w of workers) w.on('error', () => {});

  // The unknown charge: the downstream commits, the reply is lost, and it has no idempotent API.
  ds.failNext('commit-then-drop');
  const unknown = await none.enqueue(
    noneQueue,
    { order: 'C-300', amount: 450, note: CANARY },
    { jobOptions: { attempts: 3, backoff: 100 } },
  );
  await finished(noneQueue, unknown.jobId);
  // The large charge: it asks a person and waits, parked in BullMQ's delayed set.
  const large = await idem.enqueue(
    confirmQueue,
    { order: 'H-800', amount: 250_000, note: CANARY },
    { taskId: 'task-43' },
  );
  const confirmation = (await waitFor<Confirmation | undefined>(
    async () => {
      const [c] = await listConfirmations({ pool: ledger.pool, schema: t.schema, pending: true });
      if (!c || c.waiters.length === 0) return undefined;
      return (await confirmQueue.getJobState(large.jobId)) === 'delayed' ? c : undefined;
    },
    'the large charge to wait for its confirmation',
    60_000,
  )) as Confirmation;
  const unknownKey = (await ledger.get(unknown.key))?.key as string;
  return {
    ops,
    url: `http://127.0.0.1:${ops.http?.address?.port}/console`,
    ds,
    ledger,
    confirmQueue,
    unknownKey,
    confirmation,
    confirmJobId: large.jobId,
    async close() {
      await Promise.all(workers.map((w) => w.close()));
      await audit.close();
      await Promise.all([auditQueue.close(), noneQueue.close(), confirmQueue.close()]);
      await ops.close({ timeoutMs: 5_000 });
      await ds.close();
      await ledger.close();
    },
  };
}

/** A browser-like client of the console: its cookie, and the forms of the last page it read. */
export class ConsoleClient {
  cookie = '';
  constructor(
    readonly url: string,
    readonly origin = new URL(url).origin,
  ) {}

  async signIn(token: string): Promise<Response> {
    const res = await this.post('/login', { token });
    const set = res.headers.get('set-cookie') ?? '';
    this.cookie = set.split(';')[0] ?? '';
    return res;
  }

  get(path: string): Promise<Response> {
    return fetch(`${this.url}${path}`, { headers: { cookie: this.cookie }, redirect: 'manual' });
  }

  async html(path: string): Promise<string> {
    return (await this.get(path)).text();
  }

  post(path: string, form: Record<string, string>, headers: Record<string, string> = {}): Promise<Response> {
    return fetch(`${this.url}${path}`, {
      method: 'POST',
      redirect: 'manual',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        cookie: this.cookie,
        origin: this.origin,
        ...headers,
      },
      body: new URLSearchParams(form).toString(),
    });
  }

  /** The session's anti-forgery token and a fresh one-time form id, read from a page's form. */
  static fields(page: string): { _csrf: string; _form: string } {
    const csrf = /name="_csrf" value="([^"]+)"/.exec(page)?.[1];
    const form = /name="_form" value="([^"]+)"/.exec(page)?.[1];
    if (!csrf) throw new Error('no anti-forgery token on the page');
    return { _csrf: csrf, _form: form ?? randomBytes(16).toString('base64url') };
  }
}
