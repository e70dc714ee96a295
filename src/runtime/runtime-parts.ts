import type { ConnectionOptions, Worker } from 'bullmq';
import type pg from 'pg';
import { AuditStore } from '../audit/audit-store.js';
import type { AuditEmitter } from '../audit/emitter.js';
import { IdempotencyConfigError } from '../errors/errors.js';
import { PostgresLedger } from '../ledger/postgres-ledger.js';
import type { ResolvingOperation } from '../operation/resolved-result.js';
import type { WorkerTiming } from '../operation/retry-window.js';
import { openRuntimeEmitter, openRuntimeWriter, runtimeActorId } from './audit-parts.js';
import { RuntimeQueues } from './queues.js';
import type { ResolvedOptions } from './resolve-options.js';
import type { EnqueueParts } from './runtime-enqueue.js';
import { type RelayParts, type RunningRelay, startRelay } from './runtime-relay.js';

/**
 * What a runtime builds from its resolved options, owns and closes: the ledger and its pool, the
 * audit store, the queues, the audit writer and emitter, the workers, the in-process relay. Apart
 * from the runtime's methods (create-idempotency.ts) because their life is one concern, the order
 * they are opened in and closed in, and the methods' another: what an application does with them.
 */
export class RuntimeParts {
  readonly options: ResolvedOptions;
  readonly ledger: PostgresLedger;
  readonly store: AuditStore;
  readonly queues: RuntimeQueues;
  readonly workers: Worker[] = [];
  /** The lock and stall settings of the worker built for each queue: `enqueue` checks retention against them. */
  readonly timings = new Map<string, WorkerTiming>();
  /** The operations this runtime built a worker or processor for, by name: `resolve` uses them. */
  readonly operations = new Map<string, ResolvingOperation>();
  readonly enqueue: EnqueueParts;
  private readonly writer: Worker | undefined;
  private emitter: AuditEmitter | undefined;
  /** The in-process relay (`intents.relay`), and its listener. */
  private readonly relay: RunningRelay | undefined;
  private closing: Promise<void> | undefined;

  constructor(o: ResolvedOptions) {
    this.options = o;
    this.ledger = new PostgresLedger({
      ...(typeof o.postgres === 'string' ? { connectionString: o.postgres } : { pool: o.postgres }),
      schema: o.schema,
      logger: o.logger,
      ...(o.poolSize === undefined ? {} : { poolSize: o.poolSize }),
      ...o.prepared,
    });
    const pool = this.ledger.pool;
    this.store = new AuditStore(pool, o.schema, o.auditPolicy, { ...o.prepared, logger: o.logger });
    this.queues = new RuntimeQueues(this.connection, o.prefix, o.logger);
    this.writer = openRuntimeWriter(o, this.connection, pool);
    this.enqueue = {
      pool,
      schema: o.schema,
      keyring: o.keyring,
      durableByDefault: o.durableByDefault,
      timing: (queue) => this.timings.get(queue),
      emitter: () => this.auditEmitter(),
      actorId: runtimeActorId(o.owner),
    };
    if (o.relay) this.relay = startRelay(this.relayParts(), o.relay, o.logger, () => this.closing !== undefined);
  }

  get pool(): pg.Pool {
    return this.ledger.pool;
  }

  get connection(): ConnectionOptions {
    return this.options.redis.connection;
  }

  /** The emitter, made on first use: a runtime used only for operator actions opens no audit queue. */
  auditEmitter(): AuditEmitter | undefined {
    const audit = this.options.audit;
    if (!audit || this.emitter) return this.emitter;
    this.emitter = openRuntimeEmitter(this.options, audit, this.queues.get(audit.queue), this.pool);
    return this.emitter;
  }

  /** Sends the events the emitter holds, if one was made. */
  async flush(): Promise<void> {
    await this.emitter?.flush();
  }

  /** What the relay uses of the runtime; the emitter made now if the runtime has a trail. */
  relayParts(): RelayParts {
    return {
      pool: this.pool,
      schema: this.options.schema,
      queue: (name) => this.queues.get(name),
      actorId: runtimeActorId(this.options.owner),
      emitter: this.auditEmitter(),
    };
  }

  assertOpen(): void {
    if (this.closing) {
      throw new IdempotencyConfigError('the runtime is closed (idem.close() was called)', { option: 'closed' });
    }
  }

  /** Closes every part, producers of audit events first; once (later calls return the first's promise). */
  close(): Promise<void> {
    this.closing ??= this.shutDown();
    return this.closing;
  }

  private async shutDown(): Promise<void> {
    const failures: unknown[] = [];
    const step = async (what: () => Promise<unknown>) => {
      try {
        await what();
      } catch (err) {
        failures.push(err);
      }
    };
    if (this.relay) {
      const { relay, listener } = this.relay;
      await step(async () => {
        await listener?.stop();
        await relay.stop();
      });
    }
    await step(() => Promise.all(this.workers.map((w) => w.close())));
    if (this.emitter) {
      const emitter = this.emitter;
      await step(() => emitter.close());
    }
    if (this.writer) {
      const writer = this.writer;
      await step(() => writer.close());
    }
    await step(() => this.queues.close());
    await step(() => this.store.close());
    await step(() => this.ledger.close());
    await step(() => this.options.redis.close());
    if (failures.length > 0) throw failures[0];
  }
}
