import type { ConnectionOptions, WorkerOptions } from 'bullmq';
import { IdempotencyConfigError } from '../errors/errors.js';
import type { WorkerTiming } from '../operation/retry-window.js';
import type { WithIdempotencyOptions } from '../worker/types.js';

/** What the wrapper takes beyond the runtime's shared parts (ledger, keyring, audit, logger, observer). */
export type ProcessorOptions<DB = unknown> = Pick<
  WithIdempotencyOptions<DB>,
  'db' | 'jobOptions' | 'inProgressPollMs'
> & {
  /** The lock and stall settings of the Worker that will run the processor. @defaultValue BullMQ's */
  worker?: WorkerTiming;
};

/**
 * BullMQ's worker options, without the connection and prefix (the runtime's; giving other ones
 * is refused), and the wrapper's own: `db` for `ctx.tx`, the queue's default `jobOptions` checked
 * against retention, `inProgressPollMs`. The lock and stall settings given here are the ones the
 * lease and retention are checked against.
 */
export type IdempotencyWorkerOptions<DB = unknown> = Omit<WorkerOptions, 'connection' | 'prefix'> &
  Omit<ProcessorOptions<DB>, 'worker'> & {
    /** The runtime's connection, if given at all: any other is refused. */
    connection?: ConnectionOptions;
    /** The runtime's prefix, if given at all: any other is refused. */
    prefix?: string;
  };

/** The options split: BullMQ's (with the runtime's connection and prefix) and the wrapper's. */
export function splitWorkerOptions<DB>(
  options: IdempotencyWorkerOptions<DB>,
  runtime: { connection: ConnectionOptions; prefix: string },
): { bullmq: WorkerOptions; wrapper: ProcessorOptions<DB> } {
  const { connection, prefix, db, jobOptions, inProgressPollMs, ...rest } = options;
  if (prefix !== undefined && prefix !== runtime.prefix) {
    throw new IdempotencyConfigError(
      `workerOptions.prefix ${JSON.stringify(prefix)} differs from the runtime's ${JSON.stringify(runtime.prefix)}: ` +
        'its jobs would be in keys no producer of this runtime writes; set prefix once, in createIdempotency',
      { option: 'workerOptions.prefix' },
    );
  }
  if (connection !== undefined && connection !== runtime.connection) {
    throw new IdempotencyConfigError(
      "workerOptions.connection differs from the runtime's: set the connection once, in createIdempotency (redis)",
      { option: 'workerOptions.connection' },
    );
  }
  const worker: WorkerTiming = {
    ...(rest.lockDuration === undefined ? {} : { lockDuration: rest.lockDuration }),
    ...(rest.stalledInterval === undefined ? {} : { stalledInterval: rest.stalledInterval }),
    ...(rest.maxStalledCount === undefined ? {} : { maxStalledCount: rest.maxStalledCount }),
  };
  return {
    bullmq: { ...rest, connection: runtime.connection, prefix: runtime.prefix },
    wrapper: {
      worker,
      ...(db === undefined ? {} : { db }),
      ...(jobOptions === undefined ? {} : { jobOptions }),
      ...(inProgressPollMs === undefined ? {} : { inProgressPollMs }),
    },
  };
}
