import type { ConnectionOptions, Queue, Worker } from 'bullmq';
import { Counter, type Registry } from 'prom-client';
import { errorLabel } from '../errors/clean-name.js';
import { DEFAULT_METRICS_PREFIX } from '../observability/metrics.js';
import { KeptSchedule } from '../shared/kept-schedule.js';
import type { Logger } from '../shared/logger.js';
import { openWorker } from '../shared/queue-backend.js';
import type { IntentRelay, RelayCounts } from './intent-relay.js';

export const DEFAULT_RELAY_QUEUE = 'bullmq-idempotency-relay';
export const RELAY_SCHEDULER_ID = 'intent-relay';
/** How often the operations process's relay runs when no notification woke it. */
export const DEFAULT_RELAY_EVERY_MS = 5_000;

/** The relay's schedule, kept in Redis and re-created when missing, like the sweeper's. */
export function relaySchedule(queue: Queue, everyMs = DEFAULT_RELAY_EVERY_MS, logger?: Logger): KeptSchedule {
  return new KeptSchedule(queue, { id: RELAY_SCHEDULER_ID, jobName: 'relay', everyMs }, logger);
}

/** Whether the relay's job scheduler exists (for `stats`, which has no process to ask). */
export async function relayScheduled(queue: Queue): Promise<boolean> {
  return (await queue.getJobScheduler(RELAY_SCHEDULER_ID)) !== undefined;
}

/**
 * The worker of the relay's scheduled jobs: each runs `relay` once (a run already going, woken by
 * a notification, is joined, not doubled) and returns the relay's totals so far.
 */
export function createRelayWorker(options: {
  connection: ConnectionOptions;
  relay: IntentRelay;
  prefix?: string;
  queueName?: string;
  logger?: Logger;
}): Worker {
  const worker = openWorker(
    options.queueName ?? DEFAULT_RELAY_QUEUE,
    async () => {
      await options.relay.run();
      return { ...options.relay.totals };
    },
    { connection: options.connection, concurrency: 1, ...(options.prefix ? { prefix: options.prefix } : {}) },
  );
  worker.on('error', (err) => options.logger?.error({ err: errorLabel(err) }, 'relay worker error'));
  return worker;
}

/**
 * Counters of what the relay did (`bqi_intents_total{result=relayed|readded|claimed}`): an
 * intent re-added is an intent Redis lost before a claim. Returns the function to call per run.
 */
export function relayMetrics(registry: Registry, prefix = DEFAULT_METRICS_PREFIX): (counts: RelayCounts) => void {
  const intents = new Counter({
    name: `${prefix}intents_total`,
    help: 'Durable intents the relay handled, by result (relayed after a commit, readded: the job vanished before a claim, claimed: deleted)',
    labelNames: ['result'],
    registers: [registry],
  });
  return (c) => {
    if (c.relayed > 0) intents.inc({ result: 'relayed' }, c.relayed);
    if (c.readded > 0) intents.inc({ result: 'readded' }, c.readded);
    if (c.claimed > 0) intents.inc({ result: 'claimed' }, c.claimed);
  };
}
