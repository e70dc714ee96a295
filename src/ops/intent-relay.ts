import type { Queue } from 'bullmq';
import type pg from 'pg';
import type { AuditEmitter } from '../audit/emitter.js';
import { errorLabel } from '../errors/clean-name.js';
import { intentExecutor } from '../intents/executor.js';
import { intentEvent } from '../intents/intent-events.js';
import { type DueIntent, deleteClaimedIntents, lockDueIntents, markIntentsChecked } from '../intents/intent-store.js';
import { queueRedis } from '../shared/bullmq.js';
import type { Logger } from '../shared/logger.js';

/** Intents looked at per transaction. */
export const DEFAULT_RELAY_BATCH_SIZE = 200;
/** Transactions per run at most: a backlog larger than this is taken by the next runs. */
export const DEFAULT_RELAY_MAX_BATCHES = 50;
/** How long an intent whose job is in Redis waits before the relay looks at it again. */
export const DEFAULT_RELAY_RECHECK_MS = 30_000;
/** How long the relay leaves an intent to the producer that recorded it and adds its job at once. */
export const DEFAULT_INTENT_GRACE_MS = 30_000;

export type RelayOptions = {
  pool: pg.Pool;
  schema: string;
  /** The BullMQ queue of a name, on the connection and prefix the workers use. */
  queue(name: string): Queue;
  /** @defaultValue {@link DEFAULT_RELAY_BATCH_SIZE} */
  batchSize?: number;
  /** @defaultValue {@link DEFAULT_RELAY_MAX_BATCHES} */
  maxBatches?: number;
  /** @defaultValue {@link DEFAULT_RELAY_RECHECK_MS} */
  recheckAfterMs?: number;
  /** Records `idempotency.intent_accepted` (a deferred intent, first relayed) and `idempotency.intent_readded`. */
  emitter?: AuditEmitter;
  /** @defaultValue `'intent-relay'` */
  actorId?: string;
};

/** What one relay run did. */
export type RelayCounts = {
  /** Intents recorded in a transaction whose job the relay added after the commit. */
  relayed: number;
  /** Intents whose job vanished before any claim (no ledger row, no job) and was added again. */
  readded: number;
  /** Intents whose key has a ledger row: claimed, the ledger holds the truth; deleted. */
  claimed: number;
  /** Intents whose job is in Redis and not claimed yet: looked at again later. */
  waiting: number;
  batches: number;
};

export const emptyRelayCounts = (): RelayCounts => ({ relayed: 0, readded: 0, claimed: 0, waiting: 0, batches: 0 });

/** Which jobs of `intents` exist (their hash in Redis: one pipelined round trip per queue). */
async function jobsPresent(intents: DueIntent[], queueOf: (name: string) => Queue): Promise<Set<string>> {
  const byQueue = new Map<string, DueIntent[]>();
  for (const i of intents) byQueue.set(i.queue, [...(byQueue.get(i.queue) ?? []), i]);
  const present = new Set<string>();
  for (const [name, list] of byQueue) {
    const queue = queueOf(name);
    const redis = await queueRedis(queue);
    if (!redis) {
      // Another backend (BullMQ's PostgreSQL backend): its stored form, one read per job.
      const backend = queue.backend as unknown as { getJobData(id: string): Promise<unknown> };
      const found = await Promise.all(list.map((i) => backend.getJobData(i.jobId)));
      list.forEach((i, n) => {
        if (found[n] !== undefined && found[n] !== null) present.add(i.key);
      });
      continue;
    }
    const pipeline = redis.pipeline();
    for (const i of list) pipeline.exists(queue.toKey(i.jobId));
    const replies = (await pipeline.exec()) ?? [];
    list.forEach((i, n) => {
      const [err, found] = replies[n] ?? [null, 0];
      if (err) throw err;
      if (Number(found) > 0) present.add(i.key);
    });
  }
  return present;
}

/**
 * Moves recorded intents to BullMQ, in bounded batches, each one transaction:
 * 1. the due intents are locked (`FOR UPDATE SKIP LOCKED`: concurrent relays take other rows);
 * 2. their jobs are looked up in Redis, *before* the ledger: a job that was claimed, then
 *    finished and was removed, has its ledger row by then, so an intent is never taken for lost
 *    while its claim is running;
 * 3. those whose key has a ledger row were claimed: deleted (the ledger holds the truth now);
 * 4. those with neither a ledger row nor a job are added (`addBulk`, under the job id of their
 *    key: an add that meets the job absorbs); a first add is a relay, a later one a re-add;
 * 5. the rest are marked checked, due again after `recheckAfterMs`.
 * Every statement touches its keys by `= ANY`. Stops at a short batch or after `maxBatches`.
 *
 * @example
 * const counts = await relayIntents({ pool, schema: 'payments', queue: (name) => queues.get(name) });
 */
export async function relayIntents(options: RelayOptions): Promise<RelayCounts> {
  const batchSize = options.batchSize ?? DEFAULT_RELAY_BATCH_SIZE;
  const maxBatches = options.maxBatches ?? DEFAULT_RELAY_MAX_BATCHES;
  const recheck = options.recheckAfterMs ?? DEFAULT_RELAY_RECHECK_MS;
  const actorId = options.actorId ?? 'intent-relay';
  const counts = emptyRelayCounts();
  while (counts.batches < maxBatches) {
    const client = await options.pool.connect();
    let due: DueIntent[] = [];
    try {
      const exec = intentExecutor(client);
      await client.query('begin');
      due = await lockDueIntents(exec, options.schema, batchSize);
      if (due.length > 0) {
        const present = await jobsPresent(due, options.queue);
        const claimed = new Set(
          await deleteClaimedIntents(
            exec,
            options.schema,
            due.map((i) => i.key),
          ),
        );
        const open = due.filter((i) => !claimed.has(i.key));
        const missing = open.filter((i) => !present.has(i.key));
        await addJobs(missing, options.queue);
        const readded = missing.filter((i) => i.relayedAt !== null);
        await markIntentsChecked(
          exec,
          options.schema,
          open.map((i) => i.key),
          readded.map((i) => i.key),
          recheck,
        );
        await client.query('commit');
        counts.claimed += claimed.size;
        counts.readded += readded.length;
        counts.relayed += missing.length - readded.length;
        counts.waiting += open.length - missing.length;
        for (const i of missing) {
          const fact =
            i.relayedAt === null
              ? ({ kind: 'accepted', deferred: true } as const)
              : ({ kind: 'readded', n: i.readds + 1 } as const);
          options.emitter?.record(intentEvent(i, fact, actorId));
        }
      } else {
        await client.query('commit');
      }
      client.release();
    } catch (err) {
      await client.query('rollback').catch(() => {});
      client.release(err instanceof Error ? err : true);
      throw err;
    }
    counts.batches++;
    if (due.length < batchSize) break;
  }
  return counts;
}

async function addJobs(intents: DueIntent[], queueOf: (name: string) => Queue): Promise<void> {
  const byQueue = new Map<string, DueIntent[]>();
  for (const i of intents) byQueue.set(i.queue, [...(byQueue.get(i.queue) ?? []), i]);
  for (const [name, list] of byQueue) {
    await queueOf(name).addBulk(
      list.map((i) => ({ name: i.jobName, data: i.data, opts: { ...i.opts, jobId: i.jobId } })),
    );
  }
}

/**
 * Runs {@link relayIntents} one run at a time: a run asked for during another (a notification, a
 * tick) makes one more run after it, never a second concurrent one. `totals` adds up every run
 * (what metrics read); a run that fails is logged and counted in `failures`, and the next one
 * tries again.
 */
export class IntentRelay {
  readonly totals: RelayCounts & { runs: number; failures: number } = { ...emptyRelayCounts(), runs: 0, failures: 0 };
  private running: Promise<void> | undefined;
  private again = false;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;

  constructor(
    private readonly options: RelayOptions,
    private readonly logger?: Logger,
    private readonly onRun?: (counts: RelayCounts) => void,
  ) {}

  /** Asks for a run; resolves when a run that started after this call has finished. */
  run(): Promise<void> {
    if (this.running) {
      // The loop makes one more run before it settles.
      this.again = true;
      return this.running;
    }
    this.running = this.loop().finally(() => {
      this.running = undefined;
    });
    return this.running;
  }

  /** Runs every `everyMs` (a timer of this process) until {@link stop}. */
  every(everyMs: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.run().finally(() => this.every(everyMs));
    }, everyMs);
    this.timer.unref();
  }

  /** Stops the timer and waits for a run in progress. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.running;
  }

  private async loop(): Promise<void> {
    do {
      this.again = false;
      try {
        const counts = await relayIntents(this.options);
        this.totals.runs++;
        for (const k of ['relayed', 'readded', 'claimed', 'waiting', 'batches'] as const) this.totals[k] += counts[k];
        if (counts.readded > 0)
          this.logger?.warn({ ...counts }, 'intents re-added: their jobs vanished before a claim');
        this.onRun?.(counts);
      } catch (err) {
        this.totals.failures++;
        this.logger?.warn({ err: errorLabel(err) }, 'intent relay run failed; the next run tries again');
      }
    } while (this.again && !this.stopped);
  }
}
