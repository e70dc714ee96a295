import type { Queue } from 'bullmq';
import type pg from 'pg';
import type { AuditEmitter } from '../audit/emitter.js';
import { errorLabel } from '../errors/clean-name.js';
import { IntentListener } from '../intents/listener.js';
import { IntentRelay, type RelayOptions } from '../ops/intent-relay.js';
import type { Logger } from '../shared/logger.js';
import type { IdempotencyRelayOptions } from './options.js';

/**
 * The intent relay as a runtime runs it: `idem.relayIntents()` once, or in process
 * (`intents.relay`) on every commit it hears and every `everyMs`. Apart from the runtime because
 * the relay has a life of its own (a listener, a timer) that the runtime only starts and stops.
 */

/** Default polling interval of the in-process relay. */
const DEFAULT_RELAY_EVERY_MS = 5_000;

/** What the relay uses of the runtime. */
export type RelayParts = {
  pool: pg.Pool;
  schema: string;
  queue: (name: string) => Queue;
  actorId: string;
  emitter: AuditEmitter | undefined;
};

export type RunningRelay = { relay: IntentRelay; listener: IntentListener | undefined };

/** The relay's options from the runtime's parts and the caller's bounds. */
export function relayOptions(
  parts: RelayParts,
  options: Omit<IdempotencyRelayOptions, 'everyMs' | 'listen'>,
): RelayOptions {
  return {
    pool: parts.pool,
    schema: parts.schema,
    queue: parts.queue,
    actorId: parts.actorId,
    ...(parts.emitter ? { emitter: parts.emitter } : {}),
    ...(options.batchSize === undefined ? {} : { batchSize: options.batchSize }),
    ...(options.recheckAfterMs === undefined ? {} : { recheckAfterMs: options.recheckAfterMs }),
  };
}

/**
 * The in-process relay: a run at once, then one per notification (a commit) and per `everyMs`.
 * `closing` says whether the runtime began closing while the listener started: then it never runs.
 */
export function startRelay(
  parts: RelayParts,
  options: IdempotencyRelayOptions,
  logger: Logger,
  closing: () => boolean,
): RunningRelay {
  const relay = new IntentRelay(relayOptions(parts, options), logger);
  const listener =
    options.listen === false ? undefined : new IntentListener(parts.pool, parts.schema, () => void relay.run(), logger);
  const everyMs = options.everyMs ?? DEFAULT_RELAY_EVERY_MS;
  void (async () => {
    try {
      await listener?.start();
    } catch (err) {
      logger.warn({ err: errorLabel(err) }, 'intent relay could not listen: polling only');
    }
    if (closing()) return;
    await relay.run();
    relay.every(everyMs);
  })();
  return { relay, listener };
}
