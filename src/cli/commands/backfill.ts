import type { Queue } from 'bullmq';
import type pg from 'pg';
import { readCheckpoint } from '../../audit/backfill-checkpoint.js';
import { type BackfillProgress, DEFAULT_BACKFILL_QUEUE, runBackfill } from '../../jobs/audit-backfill.js';
import { countLedgerAfter } from '../../ledger/scans.js';
import type { CliContext, Output } from '../context.js';
import { CliError, EXIT, OPERATIONS_PROCESS, usageError } from '../errors.js';
import { formatDuration, toJson } from '../format.js';

export type BackfillCommandOptions = {
  since?: Date;
  name: string;
  wait?: boolean;
  /** With `wait`: how long the job may go without starting or without progress, in milliseconds. */
  timeout?: number;
  inline?: boolean;
  pageSize?: number;
  maxRowsPerSecond?: number;
  json?: boolean;
};

/** Where a backfill starts and how much it has ahead, for the progress line. */
async function plan(pool: pg.Pool, schema: string, name: string, since: Date | undefined) {
  const cp = await readCheckpoint(pool, schema, name);
  const cursor = since ? { at: since.toISOString(), key: '' } : cp.cursor;
  return {
    rowsBefore: cp.rowsScanned,
    eventsBefore: cp.eventsEnqueued,
    total: await countLedgerAfter(pool, schema, cursor),
  };
}

/** The live progress line: redrawn in place on a terminal, one line a second otherwise (stderr). */
class ProgressLine {
  private readonly started = Date.now();
  private lastPrint = 0;
  private drawn = false;

  constructor(
    private readonly io: Output,
    private readonly p: Awaited<ReturnType<typeof plan>>,
  ) {}

  /** Counts of this run (the checkpoint's counters are cumulative). */
  run(progress: BackfillProgress) {
    return {
      rowsScanned: Math.max(0, progress.rowsScanned - this.p.rowsBefore),
      eventsEnqueued: Math.max(0, progress.eventsEnqueued - this.p.eventsBefore),
      outboxBatchesDrained: progress.outboxBatchesDrained,
      done: progress.done,
    };
  }

  update(progress: BackfillProgress): void {
    const now = Date.now();
    if (!progress.done && !this.io.progressTTY && now - this.lastPrint < 1000) return;
    this.lastPrint = now;
    const r = this.run(progress);
    const seconds = Math.max((now - this.started) / 1000, 0.001);
    const rate = r.rowsScanned / seconds;
    const total = Math.max(this.p.total, r.rowsScanned);
    const pct = total === 0 ? 100 : Math.floor((r.rowsScanned / total) * 100);
    const eta = progress.done
      ? 'done'
      : rate > 0
        ? `ETA ${formatDuration(((total - r.rowsScanned) / rate) * 1000)}`
        : 'ETA ?';
    const line = `backfill: rows ${r.rowsScanned}/${total} (${pct}%) · events ${r.eventsEnqueued} · ${rate.toFixed(0)} rows/s · ${eta}`;
    if (this.io.progressTTY) {
      this.io.errRaw(`\r\x1b[2K${line}`);
      this.drawn = true;
    } else {
      this.io.err(line);
    }
  }

  end(): void {
    if (this.drawn) this.io.errRaw('\n');
    this.drawn = false;
  }
}

function onSigint(): { readonly interrupted: boolean; signal: AbortSignal; dispose(): void } {
  const ac = new AbortController();
  const handler = () => ac.abort();
  process.once('SIGINT', handler);
  return {
    get interrupted() {
      return ac.signal.aborted;
    },
    signal: ac.signal,
    dispose: () => process.off('SIGINT', handler),
  };
}

export async function backfillCommand(ctx: CliContext, opts: BackfillCommandOptions): Promise<void> {
  if (opts.timeout !== undefined && !opts.wait) throw usageError('--timeout goes with --wait only');
  if (!opts.inline && (opts.pageSize !== undefined || opts.maxRowsPerSecond !== undefined)) {
    throw usageError('--page-size and --max-rows-per-second apply to --inline only (the worker uses its own settings)');
  }
  ctx.require('DATABASE_URL', 'REDIS_URL');
  const pool = await ctx.pool();
  await ctx.redis();
  const p = await plan(pool, ctx.schema, opts.name, opts.since);
  const line = new ProgressLine(ctx.io, p);
  const sigint = onSigint();
  try {
    if (opts.inline) {
      const auditQueue = await ctx.queue(ctx.config.auditQueue);
      const result = await runBackfill({
        pool,
        auditQueue,
        schema: ctx.schema,
        name: opts.name,
        signal: sigint.signal,
        onProgress: (pr) => line.update(pr),
        ...(opts.since ? { since: opts.since } : {}),
        ...(opts.pageSize ? { pageSize: opts.pageSize } : {}),
        ...(opts.maxRowsPerSecond ? { maxRowsPerSecond: opts.maxRowsPerSecond } : {}),
      });
      line.end();
      if (!result.done) {
        throw new CliError(
          EXIT.interrupted,
          `interrupted: the backfill resumes from its checkpoint on the next run with --name ${opts.name}`,
        );
      }
      report(ctx, opts, line.run(result), ctx.config.auditQueue);
      return;
    }
    const queue = await ctx.queue(DEFAULT_BACKFILL_QUEUE);
    const job = await queue.add(
      'backfill',
      { name: opts.name, ...(opts.since ? { since: opts.since.toISOString() } : {}) },
      { removeOnComplete: 100, removeOnFail: 100 },
    );
    const jobId = job.id as string;
    if (!opts.wait) {
      if (opts.json) ctx.io.out(toJson({ jobId, queue: DEFAULT_BACKFILL_QUEUE, name: opts.name, rowsAhead: p.total }));
      else
        ctx.io.out(
          `enqueued backfill job ${jobId} on queue ${DEFAULT_BACKFILL_QUEUE} (checkpoint ${opts.name}, about ${p.total} ledger rows ahead); ` +
            `${OPERATIONS_PROCESS} runs it: follow it with --wait`,
        );
      return;
    }
    ctx.io.err(
      `enqueued backfill job ${jobId} on queue ${DEFAULT_BACKFILL_QUEUE}; waiting for it (Ctrl-C stops waiting)`,
    );
    const final = await follow(ctx, queue, jobId, line, sigint, opts.timeout ?? DEFAULT_WAIT_TIMEOUT_MS);
    line.update(final);
    line.end();
    report(ctx, opts, line.run(final), ctx.config.auditQueue, jobId);
  } finally {
    line.end();
    sigint.dispose();
  }
}

const WAITING = new Set(['waiting', 'prioritized', 'delayed', 'waiting-children']);
const NO_WORKER_HINT_MS = 5_000;

/** How long `backfill --wait` waits for the job to start, or for its next progress, before it gives up. */
export const DEFAULT_WAIT_TIMEOUT_MS = 5 * 60_000;

/**
 * Follows the job until it completes. Gives up (exit 1) when it has not started, or has not
 * moved, for `timeoutMs`: nothing is processing it. The job stays queued and runs when a worker
 * takes it (a backfill is safe to run any time).
 */
async function follow(
  ctx: CliContext,
  queue: Queue,
  jobId: string,
  line: ProgressLine,
  sigint: { readonly interrupted: boolean },
  timeoutMs: number,
): Promise<BackfillProgress> {
  const since = Date.now();
  let hinted = false;
  let lastMove = since;
  let lastSeen = '';
  for (;;) {
    if (sigint.interrupted) {
      throw new CliError(EXIT.interrupted, `stopped waiting; backfill job ${jobId} keeps running on the worker`);
    }
    const job = await queue.getJob(jobId);
    if (!job) throw new CliError(EXIT.failure, `backfill job ${jobId} disappeared from queue ${queue.name}`);
    const state = await job.getState();
    if (state === 'completed') return job.returnvalue as BackfillProgress;
    if (state === 'failed') {
      line.end();
      throw new CliError(EXIT.failure, `backfill job ${jobId} failed: ${job.failedReason}`);
    }
    const seen = `${state} ${JSON.stringify(job.progress)}`;
    if (seen !== lastSeen) {
      lastSeen = seen;
      lastMove = Date.now();
    }
    if (Date.now() - lastMove > timeoutMs) {
      line.end();
      throw new CliError(
        EXIT.failure,
        `gave up after ${formatDuration(timeoutMs)} (--timeout): backfill job ${jobId} is ${state} and ` +
          `${WAITING.has(state) ? 'nothing has started it' : 'has made no progress'}. Is ${OPERATIONS_PROCESS} running ` +
          `with prefix ${ctx.config.prefix}? The job stays queued and runs when it is; \`backfill --inline\` runs ` +
          'the backfill in this process instead',
      );
    }
    if (typeof job.progress === 'object' && job.progress !== null) line.update(job.progress as BackfillProgress);
    else if (!hinted && WAITING.has(state) && Date.now() - since > NO_WORKER_HINT_MS) {
      hinted = true;
      line.end();
      ctx.io.err(
        `job ${jobId} is still ${state}: is ${OPERATIONS_PROCESS} running with prefix ${ctx.config.prefix}? ` +
          `\`backfill --inline\` runs the backfill in this process instead (gives up after ${formatDuration(timeoutMs)}, --timeout)`,
      );
    }
    await new Promise((r) => setTimeout(r, 250));
  }
}

function report(
  ctx: CliContext,
  opts: BackfillCommandOptions,
  run: { rowsScanned: number; eventsEnqueued: number; outboxBatchesDrained: number; done: boolean },
  auditQueue: string,
  jobId?: string,
): void {
  if (opts.json) {
    ctx.io.out(toJson({ ...(jobId ? { jobId } : {}), name: opts.name, auditQueue, ...run }));
    return;
  }
  ctx.io.out(
    `backfill done: ${run.rowsScanned} ledger rows scanned, ${run.eventsEnqueued} audit events enqueued on queue ${auditQueue}, ` +
      `${run.outboxBatchesDrained} outbox batches drained; the audit writer of ${OPERATIONS_PROCESS} stores them, ` +
      'existing events are not written twice',
  );
}
