/**
 * The demo interrupted (SIGINT, SIGTERM): every process it started ends, its workers and
 * connections are closed, and the run's data (its schema and the keys under its prefix) is
 * removed before it exits with 128 + the signal's number. While it runs, a key under its prefix
 * says so (renewed every few seconds, gone within {@link ALIVE_TTL_MS} of its end), so that
 * `--clean` tells a run in progress from the leftovers of one that was killed.
 */
import type { ChildProcess } from 'node:child_process';
import { Redis } from 'ioredis';
import { isPostgresQueueUrl } from '../src/shared/queue-backend.js';
import { type DemoPlace, demoLeftovers, removeDemoData } from './demo-data.js';

/** How long a run's "alive" key outlives its last renewal. */
export const ALIVE_TTL_MS = 15_000;
/** The bound on the clean-up after a signal: the process exits then, whatever is still open. */
const CLEANUP_BOUND_MS = 20_000;
/** The bound on closing one part (a worker finishing its job, a pool) after a signal. */
const CLOSE_BOUND_MS = 3_000;

/** The key that says a run is in progress. */
export function aliveKey(place: DemoPlace): string {
  return `${place.prefix}:demo:alive`;
}

export type DemoRun = {
  place: DemoPlace;
  databaseUrl: string;
  redisUrl: string;
  /** Ends the services started for the run (containers, an embedded server). */
  stopServices: () => Promise<void>;
  /** What the run has opened by then, closed in order after a signal (each bounded). */
  closers: () => (() => Promise<unknown>)[];
};

export type Interruption = {
  /** Processes the run started: each gets SIGKILL on a signal (and ends with the run anyway). */
  readonly children: Set<ChildProcess>;
  /** True once a signal came. */
  readonly interrupted: () => boolean;
  /** Never settles once a signal came (the clean-up exits the process); settles at once otherwise. */
  settled(): Promise<void>;
  /** Stops the alive key and the handlers: the run ended by itself. */
  done(): Promise<void>;
};

const SIGNAL_NUMBERS: Record<'SIGINT' | 'SIGTERM', number> = { SIGINT: 2, SIGTERM: 15 };

function bounded<T>(p: Promise<T>, ms: number): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    p.catch(() => undefined),
    new Promise<undefined>((resolve) => {
      timer = setTimeout(() => resolve(undefined), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

/**
 * Installs the run's signal handlers and its alive key. On SIGINT or SIGTERM: SIGKILL to every
 * child, the run's parts closed (each bounded), its data removed, the services stopped, exit with
 * 128 + the signal's number; a second signal exits at once, naming `--clean`.
 */
export async function interruptible(run: DemoRun): Promise<Interruption> {
  const children = new Set<ChildProcess>();
  // The alive marker is a Redis key; with the queues on BullMQ's PostgreSQL backend there is none.
  const redis = isPostgresQueueUrl(run.redisUrl)
    ? undefined
    : new Redis(run.redisUrl, { maxRetriesPerRequest: 1, lazyConnect: true });
  redis?.on('error', () => {});
  const renew = async () => {
    await redis?.set(aliveKey(run.place), String(process.pid), 'PX', ALIVE_TTL_MS).catch(() => {});
  };
  await redis?.connect().catch(() => {});
  await renew();
  const renewal = setInterval(renew, ALIVE_TTL_MS / 3);
  renewal.unref();
  let signalled: NodeJS.Signals | undefined;

  const killChildren = () => {
    for (const child of children) {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    }
  };

  const onSignal = (signal: 'SIGINT' | 'SIGTERM') => {
    if (signalled) {
      killChildren();
      process.stderr.write(`\n${signal} again: exiting now; npm run demo -- --clean removes what is left\n`);
      process.exit(128 + SIGNAL_NUMBERS[signal]);
    }
    signalled = signal;
    clearInterval(renewal);
    // The run's own operations fail from now on, as their connections close: that is expected.
    process.on('uncaughtException', () => {});
    process.on('unhandledRejection', () => {});
    process.stderr.write(`\n${signal}: stopping the demo's processes and removing run ${run.place.id}'s data...\n`);
    killChildren();
    void bounded(cleanUp(run), CLEANUP_BOUND_MS).then((ok) => {
      process.stderr.write(
        ok
          ? `removed schema ${run.place.schema} and the keys under ${run.place.prefix}\n`
          : `could not remove everything in time: npm run demo -- --clean ${run.place.id}\n`,
      );
      process.exit(128 + SIGNAL_NUMBERS[signal]);
    });
  };
  const onInt = () => onSignal('SIGINT');
  const onTerm = () => onSignal('SIGTERM');
  process.on('SIGINT', onInt);
  process.on('SIGTERM', onTerm);

  /** The parts closed (bounded), the data removed, the services stopped: true when all of it was done. */
  async function cleanUp(r: DemoRun): Promise<boolean> {
    // A part not made yet when the signal came throws: nothing to close.
    for (const close of r.closers()) await bounded(Promise.resolve().then(close), CLOSE_BOUND_MS);
    await redis?.quit().catch(() => {});
    await removeDemoData(r.place, r.databaseUrl, r.redisUrl);
    await bounded(r.stopServices(), CLOSE_BOUND_MS * 3);
    return true;
  }

  return {
    children,
    interrupted: () => signalled !== undefined,
    settled: () => (signalled ? new Promise<void>(() => {}) : Promise.resolve()),
    done: async () => {
      clearInterval(renewal);
      await redis?.del(aliveKey(run.place)).catch(() => {});
      await redis?.quit().catch(() => {});
      process.off('SIGINT', onInt);
      process.off('SIGTERM', onTerm);
    },
  };
}

/**
 * `npm run demo -- --clean`: lists every demo run's data and removes what runs no longer in
 * progress left (interrupted, killed, or kept with `--keep`); a run in progress is listed and left.
 * Returns the lines to print.
 */
export async function cleanLeftovers(databaseUrl: string, redisUrl: string): Promise<string[]> {
  const found = await demoLeftovers(databaseUrl, redisUrl, aliveKey);
  if (found.length === 0) return ['no demo data found'];
  const lines: string[] = [];
  for (const f of found) {
    const what = [
      ...(f.schema ? [`schema ${f.place.schema}`] : []),
      ...(f.keys > 0 ? [`${f.keys} keys under ${f.place.prefix}`] : []),
    ].join(', ');
    if (f.running) {
      lines.push(`run ${f.place.id}: ${what}: in progress, left as it is`);
      continue;
    }
    await removeDemoData(f.place, databaseUrl, redisUrl);
    lines.push(`run ${f.place.id}: removed ${what}`);
  }
  return lines;
}
