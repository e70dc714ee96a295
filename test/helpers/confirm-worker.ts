/**
 * A BullMQ worker whose processor asks for a confirmation (`ctx.confirm`) between a step and the
 * side effect, in its own OS process: the test SIGKILLs it while the job waits and starts another.
 * Its audit events go through the real AuditEmitter onto the audit queue `audit`.
 *
 * Usage: `spawnConfirmWorker(config)`; the child prints `{"event":"ready"}`, then one JSON line per
 * attempt started (`job-active`) and per finished job (`job-completed`, `job-failed`). It stops on SIGTERM or when its stdin closes.
 */
import { spawn } from 'node:child_process';
import { realpathSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Queue, Worker } from 'bullmq';
import { z } from 'zod';
import { AuditEmitter } from '../../src/audit/emitter.js';
import { auditRedactor } from '../../src/audit/redact-event.js';
import { ConfirmationDeniedError } from '../../src/confirm/errors.js';
import { RetryableError } from '../../src/errors/processor-errors.js';
import { PostgresLedger } from '../../src/ledger/postgres-ledger.js';
import { defineOperation } from '../../src/operation/define-operation.js';
import { DEFAULT_REDACTION_POLICY } from '../../src/redaction/define-policy.js';
import { postEffect } from '../../src/testing/client.js';
import type { ProcessorContext } from '../../src/worker/types.js';
import { withIdempotency } from '../../src/worker/with-idempotency.js';
import { waitFor } from './context.js';
import { testKeyring } from './keyring.js';
import { CHILD_READY_TIMEOUT_MS, type Collected, collect, nodeArgs, ROOT } from './spawn.js';

// Leases and locks long enough that a child starved for a second or two on a loaded machine keeps
// them (a 600 ms lease lost its renewal and a 1.5 s lock stalled under load); parked waits hold neither.
export const CONFIRM_TIMING = { leaseMs: 3000, lockDuration: 6000, stalledInterval: 1000 } as const;
export const AUDIT_QUEUE = 'audit';

export type ConfirmWorkerConfig = {
  databaseUrl: string;
  redisUrl: string;
  schema: string;
  prefix: string;
  queue: string;
  downstreamUrl: string;
  concurrency?: number;
};

export const confirmInput = z.object({
  order: z.string(),
  amount: z.number().int().positive(),
  /** The request's timeout and what it becomes (outside the fingerprint). */
  timeoutMs: z.number().int().positive().optional(),
  onTimeout: z.enum(['deny', 'fail']).optional(),
  /** How often the parked job looks again (outside the fingerprint). */
  recheckMs: z.number().int().positive().optional(),
});
export type ConfirmInput = z.output<typeof confirmInput>;

/** A payment that needs a person's yes: a quote (a step), the confirmation, then the charge. */
export const confirmOperation = defineOperation({
  name: 'payments.large_charge',
  namespace: 'acme/payments.large_charge',
  version: 'v1',
  input: confirmInput,
  effect: (i) => ({ order: i.order, amount: i.amount }),
  resourceKey: (i) => `order:${i.order}`,
  retention: '1h',
  lease: CONFIRM_TIMING.leaseMs,
  downstream: 'idempotent',
  maxConfirmationTimeout: '10m',
});

async function commit(url: string, body: unknown, key: string, signal: AbortSignal): Promise<string> {
  const res = await postEffect<{ id: string }>(url, body, key, signal);
  if (res.status >= 300) throw new RetryableError(`downstream ${res.status}`);
  return res.body.id;
}

export function confirmProcessor(url: string) {
  return async (input: ConfirmInput, ctx: ProcessorContext) => {
    const quote = await ctx.step('quote', (s) =>
      commit(url, { order: input.order, step: 'quote' }, s.idempotencyKey, s.signal),
    );
    const answer = await ctx.confirm({
      name: 'large-payment',
      reason: `charge ${input.amount} cents for order ${input.order}`,
      details: { amount: input.amount, quote },
      timeout: input.timeoutMs ?? '10m',
      onTimeout: input.onTimeout ?? 'deny',
      recheckEvery: input.recheckMs ?? '30s',
    });
    if (!answer.approved) throw new ConfirmationDeniedError(answer);
    const chargeId = await commit(
      url,
      { order: input.order, step: 'charge', amount: input.amount },
      ctx.idempotencyKey,
      ctx.signal,
    );
    return { quote, chargeId, approvedBy: answer.by };
  };
}

// ---------------------------------------------------------------------------------------------
// Test side.

export type ConfirmWorker = {
  readonly child: ReturnType<typeof collect>;
  lines(): { event: string; [k: string]: unknown }[];
  kill(): Promise<void>;
  stop(): Promise<void>;
};

const script = fileURLToPath(import.meta.url);

export async function spawnConfirmWorker(config: ConfirmWorkerConfig): Promise<ConfirmWorker> {
  const child = collect(
    spawn(process.execPath, [...nodeArgs(script), JSON.stringify(config)], { cwd: ROOT, stdio: 'pipe' }),
  );
  child.stdin?.on('error', () => {});
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const lines = () =>
    (child as Collected).out
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as { event: string });
  const alive = () => child.exitCode === null && child.signalCode === null;
  const handle: ConfirmWorker = {
    child,
    lines,
    async kill() {
      if (alive()) child.kill('SIGKILL');
      await exited;
    },
    async stop() {
      if (alive()) child.kill('SIGTERM');
      const timer = setTimeout(() => alive() && child.kill('SIGKILL'), 15_000);
      await exited;
      clearTimeout(timer);
    },
  };
  try {
    await waitFor(
      () => {
        if (!alive()) throw new Error(`confirm worker exited early: ${child.err}`);
        return lines().some((l) => l.event === 'ready');
      },
      'the confirm worker to be ready',
      CHILD_READY_TIMEOUT_MS,
      50,
    );
  } catch (err) {
    await handle.kill();
    throw err;
  }
  return handle;
}

// ---------------------------------------------------------------------------------------------
// Child side.

async function main(config: ConfirmWorkerConfig): Promise<void> {
  const say = (msg: object) => process.stdout.write(`${JSON.stringify(msg)}\n`);
  const connection = { url: config.redisUrl, maxRetriesPerRequest: null };
  const ledger = new PostgresLedger({ connectionString: config.databaseUrl, schema: config.schema, poolSize: 4 });
  const auditQueue = new Queue(AUDIT_QUEUE, { connection, prefix: config.prefix });
  const audit = new AuditEmitter({
    queue: auditQueue,
    pool: ledger.pool,
    schema: config.schema,
    redact: auditRedactor(DEFAULT_REDACTION_POLICY),
  });
  const worker = new Worker(
    config.queue,
    withIdempotency(confirmOperation, confirmProcessor(config.downstreamUrl), {
      ledger,
      keyring: testKeyring,
      audit,
      worker: { lockDuration: CONFIRM_TIMING.lockDuration, stalledInterval: CONFIRM_TIMING.stalledInterval },
      owner: `confirm-worker:${process.pid}`,
    }),
    {
      connection,
      prefix: config.prefix,
      lockDuration: CONFIRM_TIMING.lockDuration,
      stalledInterval: CONFIRM_TIMING.stalledInterval,
      concurrency: config.concurrency ?? 1,
    },
  );
  worker.on('error', (err) => say({ event: 'error', message: err.message }));
  worker.on('active', (job) => say({ event: 'job-active', jobId: job.id }));
  worker.on('completed', (job) => say({ event: 'job-completed', jobId: job.id }));
  worker.on('failed', (job, err) => say({ event: 'job-failed', jobId: job?.id, reason: err.message }));
  let closing = false;
  const shutdown = async () => {
    if (closing) return;
    closing = true;
    await worker.close();
    await audit.close();
    await auditQueue.close();
    await ledger.close();
    process.exit(0);
  };
  process.on('SIGTERM', () => void shutdown());
  process.stdin.on('end', () => void shutdown());
  process.stdin.resume();
  // A child whose parent (the test) died goes too.
  const parent = process.ppid;
  setInterval(() => process.ppid !== parent && process.exit(1), 250).unref();
  await worker.waitUntilReady();
  say({ event: 'ready', pid: process.pid });
}

function isMain(): boolean {
  try {
    return process.argv[1] !== undefined && realpathSync(process.argv[1]) === realpathSync(script);
  } catch {
    return false;
  }
}

if (isMain()) {
  main(JSON.parse(process.argv[2] ?? '{}') as ConfirmWorkerConfig).catch((err: unknown) => {
    process.stderr.write(`confirm worker failed: ${err instanceof Error ? err.stack : String(err)}\n`);
    process.exit(1);
  });
}
