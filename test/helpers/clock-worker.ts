/**
 * A BullMQ worker running withIdempotency() in its own OS process, optionally with its wall clock
 * shifted by libfaketime, for the lease clock tests. Its processor holds the lease for `runMs`
 * (monotonic) unless `ctx.signal` fires first, and reports what it saw.
 *
 * Usage: `spawnClockWorker(config, skew)`; the child prints one JSON line per event on stdout
 * ({"event":"ready"}, {"event":"processing"}, {"event":"aborted"}, {"event":"finished"}, ...).
 * The test kills it; it also exits when its parent dies.
 */
import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { existsSync, realpathSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { Worker } from 'bullmq';
import { z } from 'zod';
import { PostgresLedger } from '../../src/ledger/postgres-ledger.js';
import { LeaseLostError } from '../../src/worker/lease-keeper.js';
import type { ProcessorContext } from '../../src/worker/types.js';
import { withIdempotency } from '../../src/worker/with-idempotency.js';
import { testOperation } from '../fixtures/operations.js';
import { testKeyring } from './keyring.js';
import { CHILD_READY_TIMEOUT_MS, childEnv, nodeArgs, ROOT } from './spawn.js';

/** Debian's libfaketime (package `faketime`). */
export const LIBFAKETIME = '/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1';

export type ClockWorkerConfig = {
  databaseUrl: string;
  redisUrl: string;
  schema: string;
  prefix: string;
  queue: string;
  leaseMs: number;
  lockDuration: number;
  stalledInterval: number;
  /** How long the processor holds the lease when nothing aborts it (monotonic). */
  runMs: number;
};

export type ClockMessage =
  | { event: 'ready'; pid: number; wallMs: number }
  | { event: 'processing'; key: string; epoch: number; wallMs: number }
  | { event: 'aborted'; afterMs: number; wallMs: number; reason: string; message: string }
  | { event: 'finished'; afterMs: number }
  | { event: 'job-completed'; jobId: string | undefined }
  | { event: 'job-failed'; jobId: string | undefined; reason: string };

export const clockInput = z.object({ run: z.string() });

/** The operation the clock worker runs (a unique `run` per test keeps keys apart). */
export function clockOperation(leaseMs: number) {
  return testOperation({
    name: 'clock.hold',
    input: clockInput,
    effect: (i) => ({ run: i.run }),
    resourceKey: (i) => `run:${i.run}`,
    lease: leaseMs,
  });
}

// ---------------------------------------------------------------------------------------------
// Test side.

const script = fileURLToPath(import.meta.url);

export type ClockWorker = {
  readonly child: ChildProcessWithoutNullStreams;
  readonly messages: ClockMessage[];
  /** Resolves with the first matching message and when the parent received it (`performance.now()`). */
  waitFor<E extends ClockMessage['event']>(
    event: E,
    timeoutMs?: number,
  ): Promise<{ msg: Extract<ClockMessage, { event: E }>; receivedAt: number }>;
  /** SIGKILL, then waits for the process to be gone. */
  kill(): Promise<void>;
};

/**
 * Starts a clock worker whose wall clock runs `skew` off (libfaketime's offset syntax, e.g.
 * `+60s`, `-60s`; `null` for the real clock). The monotonic clock is left alone.
 */
export async function spawnClockWorker(
  config: ClockWorkerConfig,
  skew: string | null,
  readyTimeoutMs = CHILD_READY_TIMEOUT_MS,
): Promise<ClockWorker> {
  if (skew !== null && !existsSync(LIBFAKETIME))
    throw new Error(`${LIBFAKETIME} is missing (apt-get install faketime)`);
  const faked = skew === null ? {} : { LD_PRELOAD: LIBFAKETIME, FAKETIME: skew, FAKETIME_DONT_FAKE_MONOTONIC: '1' };
  const child = spawn(process.execPath, [...nodeArgs(script), JSON.stringify(config)], {
    cwd: ROOT,
    env: childEnv(faked),
    stdio: 'pipe',
  });
  const messages: ClockMessage[] = [];
  const received: number[] = [];
  const listeners = new Set<() => void>();
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (d: string) => {
    stderr += d;
  });
  child.stdin.on('error', () => {});
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  void exited.then(() => {
    for (const l of listeners) l();
  });
  createInterface({ input: child.stdout }).on('line', (line) => {
    try {
      messages.push(JSON.parse(line) as ClockMessage);
      received.push(performance.now());
    } catch {
      stderr += `[stdout] ${line}\n`;
    }
    for (const l of listeners) l();
  });
  const alive = () => child.exitCode === null && child.signalCode === null;

  const waitFor: ClockWorker['waitFor'] = (event, timeoutMs = 30_000) =>
    new Promise((resolve, reject) => {
      type M = Extract<ClockMessage, { event: typeof event }>;
      const end = (fn: () => void) => {
        clearTimeout(timer);
        listeners.delete(check);
        fn();
      };
      const check = () => {
        const i = messages.findIndex((m) => m.event === event);
        if (i >= 0) end(() => resolve({ msg: messages[i] as M, receivedAt: received[i] as number }));
        else if (!alive()) end(() => reject(new Error(`clock worker exited before '${event}'; stderr: ${stderr}`)));
      };
      const timer = setTimeout(
        () =>
          end(() =>
            reject(
              new Error(`no '${event}' within ${timeoutMs} ms; got ${JSON.stringify(messages)}; stderr: ${stderr}`),
            ),
          ),
        timeoutMs,
      );
      listeners.add(check);
      check();
    });

  const worker: ClockWorker = {
    child,
    messages,
    waitFor,
    async kill() {
      if (alive()) child.kill('SIGKILL');
      await exited;
    },
  };
  try {
    await waitFor('ready', readyTimeoutMs);
  } catch (err) {
    await worker.kill();
    throw err;
  }
  return worker;
}

// ---------------------------------------------------------------------------------------------
// Child side.

function send(msg: ClockMessage): void {
  process.stdout.write(`${JSON.stringify(msg)}\n`);
}

/** Holds the lease for `runMs` or until the signal fires; a fired signal is rethrown. */
async function hold(ctx: ProcessorContext, runMs: number): Promise<{ heldMs: number }> {
  const started = performance.now();
  send({ event: 'processing', key: ctx.idempotencyKey, epoch: ctx.epoch, wallMs: Date.now() });
  const signal = ctx.signal;
  await new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, runMs);
    signal.addEventListener(
      'abort',
      () => {
        clearTimeout(timer);
        resolve();
      },
      { once: true },
    );
  });
  const afterMs = performance.now() - started;
  if (signal.aborted) {
    const reason = signal.reason as unknown;
    send({
      event: 'aborted',
      afterMs,
      wallMs: Date.now(),
      reason: reason instanceof LeaseLostError ? reason.reason : String(reason),
      message: reason instanceof Error ? reason.message : '',
    });
    throw reason;
  }
  send({ event: 'finished', afterMs });
  return { heldMs: Math.round(afterMs) };
}

async function main(config: ClockWorkerConfig): Promise<void> {
  const parentPid = process.ppid;
  const timing = { lockDuration: config.lockDuration, stalledInterval: config.stalledInterval };
  const ledger = new PostgresLedger({ connectionString: config.databaseUrl, schema: config.schema, poolSize: 4 });
  const processor = withIdempotency(clockOperation(config.leaseMs), (_input, ctx) => hold(ctx, config.runMs), {
    ledger,
    keyring: testKeyring,
    worker: timing,
    owner: `clock-worker:${process.pid}`,
  });
  const connection = { url: config.redisUrl, maxRetriesPerRequest: null };
  const worker = new Worker(config.queue, processor, { connection, prefix: config.prefix, ...timing, concurrency: 1 });
  worker.on('error', () => {}); // a database stopped on purpose
  worker.on('completed', (job) => send({ event: 'job-completed', jobId: job.id }));
  worker.on('failed', (job, err) => send({ event: 'job-failed', jobId: job?.id, reason: err.message }));
  // The test SIGKILLs this process; it also goes when the test process does (its pipe closes,
  // or this process is handed to another parent).
  process.stdin.once('close', () => process.exit(1)).resume();
  setInterval(() => process.ppid !== parentPid && process.exit(1), 250).unref();
  await worker.waitUntilReady();
  send({ event: 'ready', pid: process.pid, wallMs: Date.now() });
}

/** True when this file is the process's entry point (the child), not an import (the test). */
function isMain(): boolean {
  try {
    return realpathSync(process.argv[1] ?? '') === realpathSync(script);
  } catch {
    return false;
  }
}

if (isMain()) {
  main(JSON.parse(process.argv[2] ?? '{}') as ClockWorkerConfig).catch((err: unknown) => {
    process.stderr.write(`clock worker failed: ${err instanceof Error ? err.stack : String(err)}\n`);
    process.exit(1);
  });
}
