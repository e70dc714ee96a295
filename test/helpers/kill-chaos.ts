import { randomInt } from 'node:crypto';
import type { Queue } from 'bullmq';
import type { CommitCountingServer } from '../../src/testing/index.js';
import { waitFor } from './context.js';
import {
  CRASH_TIMING,
  type CrashWorker,
  type CrashWorkerConfig,
  crashOperation,
  spawnCrashWorker,
} from './crash-worker.js';

/**
 * The workers of a chaos run: charges against an idempotent downstream, five at a time, the
 * crash tests' short timings, and BullMQ's stall limit raised (a job whose worker is killed
 * twice would otherwise fail for good without its processor).
 */
export function chaosWorkerConfig(
  where: Pick<
    CrashWorkerConfig,
    'databaseUrl' | 'redisUrl' | 'schema' | 'prefix' | 'queue' | 'downstreamUrl' | 'audit'
  >,
): CrashWorkerConfig {
  return {
    ...where,
    downstream: 'idempotent',
    processor: 'charge',
    blockAt: 'none',
    ...CRASH_TIMING,
    concurrency: 5,
    maxStalledCount: 20,
  };
}

export type KillChaosOptions = {
  queue: Queue;
  intents: number;
  kills: number;
  /** The downstream: it holds its responses while a worker is replaced, so work is in flight when one dies. */
  ds: CommitCountingServer;
  /** The running workers; a killed one is replaced in place. */
  workers: CrashWorker[];
  spawn: () => Promise<CrashWorker>;
  /** Set once every intent has finished: the chaos stops. */
  stopped: () => boolean;
  /** Runs at mark `k`, before its kill (cut connections, restart the database...). */
  atMark?: (k: number) => Promise<void>;
};

/**
 * The chaos, paced by progress rather than by the clock (a loaded machine slows the work and the
 * restarts alike): at each of `kills` marks (the k-th at (k + 1) / (kills + 2) of the intents
 * completed) a worker chosen at random is SIGKILLed and replaced. While it is replaced the
 * downstream holds its responses, so the work is still in flight when it dies and cannot run out
 * before the last kill. Returns how many kills landed while intents were unfinished.
 */
export async function killAtMarks(o: KillChaosOptions): Promise<number> {
  let kills = 0;
  for (let k = 0; k < o.kills && !o.stopped(); k++) {
    const mark = ((k + 1) * o.intents) / (o.kills + 2);
    await waitFor(async () => o.stopped() || (await o.queue.getCompletedCount()) >= mark, `${mark} done`, 150_000);
    if (o.stopped()) break;
    await o.atMark?.(k);
    let resume!: () => void;
    o.ds.hold = new Promise<void>((r) => {
      resume = r;
    });
    try {
      const i = randomInt(o.workers.length);
      await (o.workers[i] as CrashWorker).kill();
      if ((await o.queue.getCompletedCount()) < o.intents) kills++;
      o.workers[i] = await o.spawn();
    } finally {
      o.ds.hold = undefined;
      resume();
    }
    await new Promise((r) => setTimeout(r, randomInt(400)));
  }
  return kills;
}

/** Waits until every intent of `queue` has completed or failed. */
function allFinished(queue: Queue, intents: number): Promise<unknown> {
  return waitFor(
    async () => (await queue.getCompletedCount()) + (await queue.getFailedCount()) >= intents,
    'every intent to finish',
    150_000,
    250,
  );
}

/**
 * Enqueues `intents` charges (`<name>-<i>`) for idempotent-downstream workers of `config`: three
 * attempts each, and BullMQ's stall limit raised, since a job whose worker is killed twice would
 * otherwise fail for good without its processor.
 */
export async function enqueueChaosIntents(
  queue: Queue,
  name: string,
  intents: number,
  config: Pick<CrashWorkerConfig, 'lockDuration' | 'stalledInterval'>,
): Promise<void> {
  await crashOperation('idempotent').enqueueBulk(
    queue,
    Array.from({ length: intents }, (_, i) => ({
      input: { order: `${name}-${i}`, amount: 1 + i },
      options: {
        jobOptions: { attempts: 3, backoff: 50, removeOnComplete: false },
        worker: { lockDuration: config.lockDuration, stalledInterval: config.stalledInterval, maxStalledCount: 20 },
      },
    })),
  );
}

export type ChaosRunOptions = Pick<KillChaosOptions, 'queue' | 'intents' | 'kills' | 'ds' | 'atMark'> & {
  config: CrashWorkerConfig;
  /** The intents' order prefix. */
  name: string;
  /** Filled with the three workers as they start (the caller stops them, whatever happens). */
  workers: CrashWorker[];
};

/**
 * Three workers of `config` on `queue`, `intents` charges enqueued, a worker SIGKILLed and
 * replaced at each of `kills` marks ({@link killAtMarks}) until every intent has finished.
 * Returns how many kills landed while intents were unfinished.
 */
export async function runKillChaos(o: ChaosRunOptions): Promise<number> {
  for (let i = 0; i < 3; i++) o.workers.push(await spawnCrashWorker(o.config));
  await enqueueChaosIntents(o.queue, o.name, o.intents, o.config);
  let stopped = false;
  const chaos = killAtMarks({ ...o, spawn: () => spawnCrashWorker(o.config), stopped: () => stopped });
  try {
    await allFinished(o.queue, o.intents);
  } catch (err) {
    stopped = true;
    await chaos.catch(() => {});
    throw err;
  }
  stopped = true;
  return chaos;
}
