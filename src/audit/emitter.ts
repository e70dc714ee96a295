import type { Queue } from 'bullmq';
import type pg from 'pg';
import { ZodError } from 'zod';
import { checkSchema, DEFAULT_SCHEMA } from '../db/connection.js';
import { storable, storableText } from '../db/storable.js';
import { errorLabel } from '../errors/clean-name.js';
import type { AuditSink, Logger, WrapperEvent } from '../worker/types.js';
import type { AuditEvent } from './audit-event.js';
import { auditBatchJob } from './batch-codec.js';
import { parseAuditEvent } from './check-event.js';
import { formatReason, invalidEventReason } from './dead-letter-reason.js';
import { auditEventFromWrapper } from './from-wrapper.js';

/** Scrubs an event before it leaves the process (Redis is storage too). */
export type AuditRedactor = (event: AuditEvent) => AuditEvent;

export type AuditEmitterOptions = {
  /** The BullMQ audit queue the writer consumes. */
  queue: Queue;
  /** Postgres pool for the outbox, where batches go when Redis refuses them. */
  pool: pg.Pool;
  /** @defaultValue `'public'` */
  schema?: string;
  /** Applied to every event before it is buffered. */
  redact: AuditRedactor;
  /** Events per audit job. @defaultValue 500 */
  maxBatch?: number;
  /** Longest time an event waits in the buffer. @defaultValue 50 ms */
  maxDelayMs?: number;
  /** Events held in memory (buffer + batches in flight) before emits spill straight to the outbox. @defaultValue 20000 */
  maxBuffered?: number;
  /** Actor id of system events. @defaultValue `hostname:pid` of the worker */
  actorId?: string;
  logger?: Logger;
};

export { AUDIT_JOB_NAME } from './batch-codec.js';

/**
 * redact → validate → buffer → one BullMQ job per batch (bounded by size and time; the events are
 * deflated, see batch-codec). When Redis refuses a batch it goes to the Postgres outbox (drained
 * by the backfill). Nothing is dropped silently: an event that cannot be validated, or a batch
 * neither Redis nor Postgres takes, is counted in `metrics` and logged as an error. `close()`
 * flushes.
 */
export class AuditEmitter implements AuditSink {
  readonly metrics = { emitted: 0, enqueued: 0, outboxed: 0, invalid: 0, dropped: 0, batches: 0 };
  private buffer: AuditEvent[] = [];
  private timer: NodeJS.Timeout | undefined;
  private readonly inFlight = new Set<Promise<void>>();
  private held = 0;
  private closed = false;
  private readonly outboxTable: string;
  private readonly maxBatch: number;
  private readonly maxDelayMs: number;
  private readonly maxBuffered: number;
  private readonly actorId: string;

  constructor(private readonly opts: AuditEmitterOptions) {
    this.outboxTable = `${checkSchema(opts.schema ?? DEFAULT_SCHEMA)}.audit_outbox`;
    this.maxBatch = opts.maxBatch ?? 500;
    this.maxDelayMs = opts.maxDelayMs ?? 50;
    this.maxBuffered = opts.maxBuffered ?? 20_000;
    this.actorId = opts.actorId ?? `worker:${process.pid}`;
  }

  /**
   * Events held in memory: buffered, or in batches on their way to the queue. Past `maxBuffered`,
   * new events go straight to the outbox; a producer that can wait may pace itself on this.
   */
  get buffered(): number {
    return this.held;
  }

  /** Takes a wrapper event (the AuditSink contract). */
  emit(event: WrapperEvent): void {
    this.record(auditEventFromWrapper(event, this.actorId));
  }

  /** Takes a ready audit event (operator actions, sweeper summaries...). */
  record(event: AuditEvent): void {
    this.metrics.emitted++;
    let clean: AuditEvent;
    try {
      clean = parseAuditEvent(this.opts.redact(event));
    } catch (err) {
      this.metrics.invalid++;
      // Codes and schema paths only: zod's text, and the event's own fields, can quote data.
      const reason = err instanceof ZodError ? formatReason(invalidEventReason(err)) : 'AUDIT_EVENT_INVALID';
      this.opts.logger?.error({ reason }, 'audit event refused');
      return;
    }
    if (this.closed) {
      this.held++;
      this.send([clean]);
      return;
    }
    if (this.held >= this.maxBuffered) {
      // Back-pressure: memory stays bounded, the event goes to the outbox instead of the queue.
      this.track(this.toOutbox([clean], 'emitter over capacity'));
      return;
    }
    this.buffer.push(clean);
    this.held++;
    if (this.buffer.length >= this.maxBatch) this.flushBuffer();
    else this.timer ??= setTimeout(() => this.flushBuffer(), this.maxDelayMs);
  }

  /** Sends what is buffered and waits for every batch in flight. */
  async flush(): Promise<void> {
    this.flushBuffer();
    while (this.inFlight.size > 0) await Promise.all([...this.inFlight]);
  }

  /** Flushes and stops buffering (later events are sent one batch each). */
  async close(): Promise<void> {
    this.closed = true;
    await this.flush();
  }

  private flushBuffer(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    while (this.buffer.length > 0) this.send(this.buffer.splice(0, this.maxBatch));
  }

  private send(events: AuditEvent[]): void {
    this.metrics.batches++;
    const p = auditBatchJob(events)
      .then((job) => this.opts.queue.add(job.name, job.data, job.opts))
      .then(
        () => {
          this.metrics.enqueued += events.length;
        },
        (err: Error) => this.toOutbox(events, `enqueue failed: ${errorLabel(err)}`),
      );
    this.track(p, events.length);
  }

  private async toOutbox(events: AuditEvent[], reason: string): Promise<void> {
    try {
      // One NUL or lone surrogate in one event would lose the whole batch here: the outbox is the
      // last place these events can go, so they are made storable first.
      await this.opts.pool.query(`insert into ${this.outboxTable} (events, reason) values ($1::jsonb, $2)`, [
        JSON.stringify(storable(events)),
        storableText(reason.slice(0, 500)),
      ]);
      this.metrics.outboxed += events.length;
    } catch (err) {
      this.metrics.dropped += events.length;
      this.opts.logger?.error({ count: events.length, err: errorLabel(err), reason }, 'audit events lost');
    }
  }

  private track(p: Promise<void>, held = 0): void {
    this.inFlight.add(p);
    p.finally(() => {
      this.inFlight.delete(p);
      this.held -= held;
    });
  }
}
