/**
 * A BullMQ worker running withIdempotency() in its own OS process, for crash tests: the test
 * SIGKILLs it at a chosen point (before the downstream call, after the commit, after the ledger
 * completion but before BullMQ's acknowledgement, inside a ctx.tx transaction) and checks what
 * the next worker makes of the stalled job.
 *
 * Usage: node --import tsx test/helpers/crash-worker.ts '<CrashWorkerConfig as JSON>' (cwd = repo root),
 * or `spawnCrashWorker(config)` from a test. The child prints one JSON line per event on stdout
 * ({"event":"ready"}, {"event":"processing"}, {"event":"audit",...}, {"event":"completed-recorded"},
 * {"event":"in-tx"}, ...). It stops gracefully on SIGTERM or when its stdin closes, and exits on
 * its own when its parent dies (also while it blocks its thread on purpose).
 *
 * The operation and the processors are exported so that a takeover worker in the test process
 * runs exactly what the child runs.
 */
import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { realpathSync, writeSync } from 'node:fs';
import { resolve as resolvePath } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { Queue, Worker } from 'bullmq';
import { CompiledQuery } from 'kysely';
import { z } from 'zod';
import { AuditEmitter } from '../../src/audit/emitter.js';
import { auditRedactor } from '../../src/audit/redact-event.js';
import { auditPolicyFor } from '../../src/config/audit-policy.js';
import { RetryableError, TerminalError } from '../../src/errors/processor-errors.js';
import { PostgresLedger } from '../../src/ledger/postgres-ledger.js';
import { postEffect } from '../../src/testing/index.js';
import type { AuditSink, ProcessorContext, WrapperEvent } from '../../src/worker/types.js';
import { withIdempotency } from '../../src/worker/with-idempotency.js';
import { testOperation } from '../fixtures/operations.js';
import { testKeyring } from './keyring.js';
import { CHILD_READY_TIMEOUT_MS, nodeArgs } from './spawn.js';

/** Short BullMQ and ledger timings: the lease lapses before BullMQ redelivers a crashed job. */
export const CRASH_TIMING = { leaseMs: 600, lockDuration: 1500, stalledInterval: 300 } as const;

export type CrashProcessorKind = 'charge' | 'steps' | 'tx';
/**
 * Where the child stops on purpose (the test then SIGKILLs it):
 * - `processor-start`: the processor started (lease held), before any downstream call; blocks asynchronously;
 * - `completed`: the ledger recorded the operation's completion, BullMQ has not been told; blocks the thread;
 * - `in-tx`: inside ctx.tx after the insert, before the transaction commits; blocks the thread.
 */
export type CrashBlockAt = 'none' | 'processor-start' | 'completed' | 'in-tx';

export type CrashWorkerConfig = {
  databaseUrl: string;
  redisUrl: string;
  schema: string;
  prefix: string;
  queue: string;
  downstreamUrl: string;
  downstream: 'idempotent' | 'none';
  processor: CrashProcessorKind;
  blockAt: CrashBlockAt;
  /** Table (schema-qualified) the `tx` processor inserts into. */
  effectsTable?: string;
  leaseMs: number;
  lockDuration: number;
  stalledInterval: number;
  /** Jobs the worker runs at once. @defaultValue 1 */
  concurrency?: number;
  /** BullMQ's stall limit. @defaultValue BullMQ's (1) */
  maxStalledCount?: number;
  /**
   * The wrapper's events also go to a real AuditEmitter on this audit queue (same Redis and
   * prefix), batched every `maxDelayMs`: a SIGKILL loses what it still buffers.
   */
  audit?: { queue: string; maxDelayMs: number };
};

export type ChildMessage =
  | { event: 'ready'; pid: number }
  | {
      event: 'processing';
      jobId: string | undefined;
      epoch: number;
      takeover: boolean;
      attemptsMade: number;
      stalledCounter: number;
    }
  | {
      event: 'audit';
      type: WrapperEvent['type'];
      epoch?: number;
      stepId?: string;
      reasonCode?: string;
      attemptsMade: number;
      stalledCounter: number;
    }
  | { event: 'completed-recorded'; epoch: number | undefined }
  | { event: 'in-tx' }
  | { event: 'job-completed'; jobId: string | undefined; result: unknown }
  | { event: 'job-failed'; jobId: string | undefined; reason: string }
  | { event: 'error'; message: string }
  | { event: 'closed' };

export const crashInput = z.object({ order: z.string(), amount: z.number().int().positive() });
export type CrashInput = z.output<typeof crashInput>;

/** The operation every crash test runs (a unique `order` per test keeps keys apart). */
export function crashOperation(downstream: 'idempotent' | 'none', leaseMs: number = CRASH_TIMING.leaseMs) {
  return testOperation({
    name: 'crash.effect',
    input: crashInput,
    effect: (i) => ({ order: i.order, amount: i.amount }),
    resourceKey: (i) => `order:${i.order}`,
    lease: leaseMs,
    downstream,
  });
}

export type ProcessorHooks = {
  /** Runs first in the processor, once the attempt holds the lease. */
  onStart?: (ctx: ProcessorContext) => Promise<void> | void;
  /** Runs inside ctx.tx after the insert, before the transaction commits. */
  inTx?: () => void;
};

export const STEPS = ['a', 'b', 'c'] as const;

async function commit(url: string, body: unknown, key: string, signal: AbortSignal): Promise<string> {
  const res = await postEffect<{ id: string }>(url, body, key, signal);
  if (res.status >= 500) throw new RetryableError(`downstream ${res.status}`);
  if (res.status >= 300) throw new TerminalError(`DOWNSTREAM_${res.status}`, `downstream answered ${res.status}`);
  return res.body.id;
}

/** One downstream commit with the operation key. */
export function chargeProcessor(url: string, hooks: ProcessorHooks = {}) {
  return async (input: CrashInput, ctx: ProcessorContext): Promise<{ effectId: string }> => {
    await hooks.onStart?.(ctx);
    const effectId = await commit(url, { order: input.order, amount: input.amount }, ctx.idempotencyKey, ctx.signal);
    return { effectId };
  };
}

/** Three steps, each committing one effect downstream with the step's own key. */
export function stepsProcessor(url: string, hooks: ProcessorHooks = {}) {
  return async (input: CrashInput, ctx: ProcessorContext): Promise<Record<(typeof STEPS)[number], string>> => {
    await hooks.onStart?.(ctx);
    const out: Partial<Record<(typeof STEPS)[number], string>> = {};
    for (const name of STEPS) {
      out[name] = await ctx.step(name, (s) =>
        commit(url, { order: input.order, step: name }, s.idempotencyKey, s.signal),
      );
    }
    return out as Record<(typeof STEPS)[number], string>;
  };
}

/** One row inserted in `table` inside ctx.tx, committed together with the ledger completion. */
export function txProcessor(table: string, hooks: ProcessorHooks = {}) {
  return async (input: CrashInput, ctx: ProcessorContext): Promise<{ rowId: number }> => {
    await hooks.onStart?.(ctx);
    return ctx.tx(async (trx) => {
      const res = await trx.executeQuery(
        CompiledQuery.raw(`insert into ${table} (ref, amount) values ($1, $2) returning id`, [
          input.order,
          input.amount,
        ]) as CompiledQuery<{ id: number }>,
      );
      hooks.inTx?.();
      const row = res.rows[0];
      if (!row) throw new Error('insert returned no row');
      return { rowId: row.id };
    });
  };
}

// ---------------------------------------------------------------------------------------------
// Test side: spawning a child and reading its messages.

const root = fileURLToPath(new URL('../..', import.meta.url));
const script = fileURLToPath(import.meta.url);

export type CrashWorker = {
  readonly child: ChildProcessWithoutNullStreams;
  /** Every message received so far, in order. */
  readonly messages: ChildMessage[];
  /** What the child wrote on stderr (for failure messages). */
  stderr(): string;
  /** Resolves with the first message (received so far or later) that matches, or rejects at the deadline. */
  waitFor<E extends ChildMessage['event']>(
    event: E,
    match?: (m: Extract<ChildMessage, { event: E }>) => boolean,
    timeoutMs?: number,
  ): Promise<Extract<ChildMessage, { event: E }>>;
  /** The audit events the child's wrapper reported. */
  audit(): Extract<ChildMessage, { event: 'audit' }>[];
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  alive(): boolean;
  /** SIGKILL, then waits for the process to be gone. */
  kill(): Promise<void>;
  /** SIGTERM (graceful: closes the worker and the ledger), SIGKILL after `timeoutMs`. */
  stop(timeoutMs?: number): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
};

/** Starts a crash worker child and waits for its `ready` line. */
export async function spawnCrashWorker(
  config: CrashWorkerConfig,
  readyTimeoutMs = CHILD_READY_TIMEOUT_MS,
): Promise<CrashWorker> {
  const child = spawn(process.execPath, [...nodeArgs(script), JSON.stringify(config)], {
    cwd: root,
    stdio: 'pipe',
  });
  const messages: ChildMessage[] = [];
  const waiters = new Set<() => void>();
  let stderr = '';
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (d: string) => {
    stderr += d;
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.once('exit', (code, signal) => {
      resolve({ code, signal });
      for (const w of waiters) w();
    });
  });
  let exitInfo: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  void exited.then((e) => {
    exitInfo = e;
  });
  createInterface({ input: child.stdout }).on('line', (line) => {
    let msg: ChildMessage;
    try {
      msg = JSON.parse(line) as ChildMessage;
    } catch {
      stderr += `[stdout] ${line}\n`;
      return;
    }
    messages.push(msg);
    for (const w of waiters) w();
  });
  child.stdin.on('error', () => {}); // EPIPE after a kill

  const alive = () => child.exitCode === null && child.signalCode === null;
  const waitFor: CrashWorker['waitFor'] = (event, match, timeoutMs = 30_000) =>
    new Promise((resolve, reject) => {
      type M = Extract<ChildMessage, { event: typeof event }>;
      const find = () => messages.find((m): m is M => m.event === event && (!match || match(m as M)));
      const done = () => {
        clearTimeout(timer);
        waiters.delete(check);
      };
      const check = () => {
        const found = find();
        if (found) {
          done();
          resolve(found);
        } else if (exitInfo || !alive()) {
          done();
          reject(new Error(`crash worker exited (${JSON.stringify(exitInfo)}) before '${event}'; stderr: ${stderr}`));
        }
      };
      const timer = setTimeout(() => {
        done();
        reject(
          new Error(
            `Timed out after ${timeoutMs} ms waiting for '${event}' from the crash worker; got ${JSON.stringify(messages).slice(-4000)}; stderr: ${stderr}`,
          ),
        );
      }, timeoutMs);
      waiters.add(check);
      check();
    });

  const handle: CrashWorker = {
    child,
    messages,
    stderr: () => stderr,
    waitFor,
    audit: () => messages.filter((m): m is Extract<ChildMessage, { event: 'audit' }> => m.event === 'audit'),
    exited,
    alive,
    async kill() {
      if (alive()) child.kill('SIGKILL');
      await exited;
    },
    async stop(timeoutMs = 10_000) {
      if (alive()) child.kill('SIGTERM');
      const timer = setTimeout(() => {
        if (alive()) child.kill('SIGKILL');
      }, timeoutMs);
      try {
        return await exited;
      } finally {
        clearTimeout(timer);
      }
    },
  };
  try {
    await waitFor('ready', undefined, readyTimeoutMs);
  } catch (err) {
    await handle.kill();
    throw err;
  }
  return handle;
}

// ---------------------------------------------------------------------------------------------
// Child side.

function send(msg: ChildMessage): void {
  const line = Buffer.from(`${JSON.stringify(msg)}\n`);
  // Synchronous, so the line is out before the thread blocks (or the process is killed).
  for (let off = 0; off < line.length; ) {
    try {
      off += writeSync(1, line, off);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EAGAIN') throw err;
    }
  }
}

/** Blocks the event loop (no lock renewal, no ledger heartbeat) until killed; exits if the parent dies. */
function blockThread(parentPid: number): void {
  const cell = new Int32Array(new SharedArrayBuffer(4));
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    Atomics.wait(cell, 0, 0, 200);
    if (process.ppid !== parentPid) process.exit(1);
  }
  process.exit(1); // nobody killed us: never go on to acknowledge the job
}

async function main(config: CrashWorkerConfig): Promise<void> {
  const parentPid = process.ppid;
  const ledger = new PostgresLedger({ connectionString: config.databaseUrl, schema: config.schema, poolSize: 4 });
  const emitter = config.audit
    ? new AuditEmitter({
        queue: new Queue(config.audit.queue, {
          connection: { url: config.redisUrl, maxRetriesPerRequest: null },
          prefix: config.prefix,
        }),
        pool: ledger.pool,
        schema: config.schema,
        redact: auditRedactor(auditPolicyFor(testKeyring)),
        maxDelayMs: config.audit.maxDelayMs,
      })
    : undefined;
  const audit: AuditSink = {
    emit(e) {
      const durable = emitter?.emit(e);
      send({
        event: 'audit',
        type: e.type,
        ...(e.epoch !== undefined ? { epoch: e.epoch } : {}),
        ...(e.stepId !== undefined ? { stepId: e.stepId } : {}),
        ...(e.reasonCode !== undefined ? { reasonCode: e.reasonCode } : {}),
        attemptsMade: e.attemptsMade,
        stalledCounter: e.stalledCounter,
      });
      if (e.type === 'completed' && e.stepId === undefined && config.blockAt === 'completed') {
        // The ledger completion has committed; BullMQ has not been acknowledged yet.
        send({ event: 'completed-recorded', epoch: e.epoch });
        blockThread(parentPid);
      }
      return durable;
    },
  };
  const hooks: ProcessorHooks = {
    async onStart(ctx) {
      send({
        event: 'processing',
        jobId: ctx.job.id,
        epoch: ctx.epoch,
        takeover: ctx.takeover,
        attemptsMade: ctx.attemptsMade,
        stalledCounter: ctx.stalledCounter,
      });
      if (config.blockAt === 'processor-start') await new Promise<never>(() => {});
    },
    inTx() {
      if (config.blockAt !== 'in-tx') return;
      send({ event: 'in-tx' });
      blockThread(parentPid);
    },
  };
  const op = crashOperation(config.downstream, config.leaseMs);
  const options = {
    ledger,
    keyring: testKeyring,
    audit,
    worker: {
      lockDuration: config.lockDuration,
      stalledInterval: config.stalledInterval,
      ...(config.maxStalledCount ? { maxStalledCount: config.maxStalledCount } : {}),
    },
    owner: `crash-worker:${process.pid}`,
  };
  let processor: (job: import('bullmq').Job, token?: string, signal?: AbortSignal) => Promise<unknown>;
  if (config.processor === 'charge') {
    processor = withIdempotency(op, chargeProcessor(config.downstreamUrl, hooks), options);
  } else if (config.processor === 'steps') {
    processor = withIdempotency(op, stepsProcessor(config.downstreamUrl, hooks), options);
  } else {
    if (!config.effectsTable) throw new Error('effectsTable is required for the tx processor');
    processor = withIdempotency(op, txProcessor(config.effectsTable, hooks), options);
  }
  const worker = new Worker(config.queue, processor, {
    connection: { url: config.redisUrl, maxRetriesPerRequest: null },
    prefix: config.prefix,
    lockDuration: config.lockDuration,
    stalledInterval: config.stalledInterval,
    concurrency: config.concurrency ?? 1,
    ...(config.maxStalledCount ? { maxStalledCount: config.maxStalledCount } : {}),
  });
  worker.on('error', (err) => send({ event: 'error', message: err.message }));
  worker.on('completed', (job, result) => send({ event: 'job-completed', jobId: job.id, result }));
  worker.on('failed', (job, err) => send({ event: 'job-failed', jobId: job?.id, reason: err.message }));

  let closing = false;
  const shutdown = () => {
    if (closing) return;
    closing = true;
    void (async () => {
      await worker.close();
      await emitter?.close();
      await ledger.close();
      send({ event: 'closed' });
      process.exit(0);
    })().catch((err: unknown) => {
      process.stderr.write(`crash worker shutdown failed: ${String(err)}\n`);
      process.exit(1);
    });
  };
  process.once('SIGTERM', shutdown);
  process.stdin.once('end', shutdown).once('close', shutdown).resume();
  // Belt and braces: a parent that died without closing our stdin.
  setInterval(() => {
    if (process.ppid !== parentPid) process.exit(1);
  }, 250).unref();

  await worker.waitUntilReady();
  send({ event: 'ready', pid: process.pid });
}

function isMain(): boolean {
  const entry = process.argv[1];
  if (!entry) return false;
  try {
    return realpathSync(resolvePath(entry)) === realpathSync(script);
  } catch {
    return false;
  }
}

if (isMain()) {
  const raw = process.argv[2];
  if (!raw) {
    process.stderr.write("usage: crash-worker.ts '<json config>'\n");
    process.exit(2);
  }
  main(JSON.parse(raw) as CrashWorkerConfig).catch((err: unknown) => {
    process.stderr.write(`crash worker failed: ${err instanceof Error ? err.stack : String(err)}\n`);
    process.exit(1);
  });
}
