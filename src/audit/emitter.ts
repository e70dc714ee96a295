import type { Queue } from 'bullmq';
import type pg from 'pg';
import { ZodError } from 'zod';
import { checkSchema, DEFAULT_SCHEMA } from '../db/connection.js';
import { storable } from '../db/storable.js';
import { errorLabel } from '../errors/clean-name.js';
import { ERROR_CODES } from '../errors/idempotency-error.js';
import { DEFAULT_REDACTION_POLICY, type RedactionPolicy } from '../redaction/define-policy.js';
import type { Logger } from '../shared/logger.js';
import type { WrapperEvent } from '../shared/wrapper-event.js';
import type { AuditEvent } from './audit-event.js';
import { auditBatchJobOf, BatchBytes, type BatchTagger, eventBytes } from './batch-codec.js';
import { batchTag } from './batch-tag.js';
import { parseAuditEvent } from './check-event.js';
import { deadLetterEvent } from './dead-letter-event.js';
import { type DeadLetterReason, formatReason, invalidEventReason } from './dead-letter-reason.js';
import { auditEventFromWrapper } from './from-wrapper.js';
import { AuditEventNotDurableError } from './not-durable-error.js';
import { writeOutboxBatch } from './outbox.js';
import { type AuditRedactor, policyOfRedactor } from './redact-event.js';

export type { AuditRedactor } from './redact-event.js';

/** Largest audit event, as JSON bytes, the emitter sends: 256 KiB (a batch of 500 stays far below the writer's 64 MiB). */
export const DEFAULT_MAX_EVENT_BYTES = 256 * 1024;

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
  /**
   * An event whose JSON (after redaction) is larger is refused alone, never sent: its shape
   * (fields, size; no details) is dead-lettered with `AUDIT_EVENT_TOO_LARGE`, and the rest of its
   * batch goes on. @defaultValue {@link DEFAULT_MAX_EVENT_BYTES} (256 KiB)
   */
  maxEventBytes?: number;
  /**
   * Scrubs what the emitter dead-letters (an event `redact` left invalid). Pass the policy of
   * `redact`, so that references in dead letters match the trail's. @defaultValue DEFAULT_REDACTION_POLICY
   */
  redactionPolicy?: RedactionPolicy;
  /** Actor id of system events. @defaultValue `hostname:pid` of the worker */
  actorId?: string;
  logger?: Logger;
};

/** Settles the promise of a durable record (`recordDurable`). */
type Waiter = { resolve: () => void; reject: (err: Error) => void };

export { AUDIT_JOB_NAME } from './batch-codec.js';

/**
 * redact → validate → serialise into the batch's bytes → one BullMQ job per batch (bounded by size
 * and time; the events are deflated, see batch-codec). When Redis refuses a batch it goes to the
 * Postgres outbox (drained by the backfill). Nothing is dropped silently: an event that cannot be
 * validated, one JSON cannot write, or one over `maxEventBytes`, is dead-lettered alone (its batch
 * goes on); what neither Redis nor Postgres takes is counted in `metrics` and logged as an error.
 * `close()` flushes.
 *
 * The wrapper's own transition events are fire-and-forget (`emit` returns nothing; the ledger
 * holds each transition durably and the backfill derives it). A tool decision (`ctx.audit()`)
 * has no other record: for it `emit` returns a promise that resolves once its batch is in Redis
 * or in the outbox (`recordDurable`), about one `maxDelayMs` later.
 */
export class AuditEmitter {
  readonly metrics = {
    emitted: 0,
    enqueued: 0,
    outboxed: 0,
    invalid: 0,
    tooLarge: 0,
    deadLettered: 0,
    dropped: 0,
    batches: 0,
  };
  /** The batch being filled, as its JSON's bytes (it never holds more than one batch). */
  private readonly batch: BatchBytes;
  /** Waiters of the events in `batch`. */
  private waiters: Waiter[] = [];
  private timer: NodeJS.Timeout | undefined;
  private readonly inFlight = new Set<Promise<void>>();
  private held = 0;
  private closed = false;
  private readonly schema: string;
  private readonly deadLetterTable: string;
  private readonly maxEventBytes: number;
  private readonly policy: RedactionPolicy;
  /** Tags each batch when `redact` is the library's own redactor (batch-tag.ts). */
  private readonly tagger: BatchTagger | undefined;
  private readonly maxBatch: number;
  private readonly maxDelayMs: number;
  private readonly maxBuffered: number;
  private readonly actorId: string;

  constructor(private readonly opts: AuditEmitterOptions) {
    const schema = checkSchema(opts.schema ?? DEFAULT_SCHEMA);
    this.schema = schema;
    this.deadLetterTable = `${schema}.audit_dead_letter`;
    this.maxEventBytes = opts.maxEventBytes ?? DEFAULT_MAX_EVENT_BYTES;
    this.batch = new BatchBytes(this.maxEventBytes);
    this.policy = opts.redactionPolicy ?? DEFAULT_REDACTION_POLICY;
    const tagPolicy = policyOfRedactor(opts.redact);
    this.tagger = tagPolicy ? (count, payload) => batchTag(tagPolicy, count, payload) : undefined;
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

  /**
   * Takes a wrapper event (the AuditSink contract). A tool decision or a confirmation returns the promise of
   * {@link recordDurable}; every other event is fire-and-forget.
   */
  emit(event: WrapperEvent): void | Promise<void> {
    const e = auditEventFromWrapper(event, this.actorId);
    if (event.type === 'decision' || event.type === 'confirmation') return this.recordDurable(e);
    this.record(e);
  }

  /** Takes a ready audit event (operator actions, sweeper summaries...), fire-and-forget. */
  record(event: AuditEvent): void {
    this.accept(event, undefined);
  }

  /**
   * Takes a ready audit event and resolves once it is durable: its batch accepted by Redis (the
   * audit job added) or written to the Postgres outbox. Rejects with
   * {@link AuditEventNotDurableError} when the event was refused (too large, invalid: then
   * dead-lettered) or lost. The promise is handled already: a caller that does not await it
   * causes no unhandled rejection.
   *
   * @example
   * await emitter.recordDurable(event); // the event survives a crash of this process from here on
   */
  recordDurable(event: AuditEvent): Promise<void> {
    let waiter: Waiter | undefined;
    const p = new Promise<void>((resolve, reject) => {
      waiter = { resolve, reject };
    });
    p.catch(() => {});
    this.accept(event, waiter);
    return p;
  }

  private accept(event: AuditEvent, waiter: Waiter | undefined): void {
    this.metrics.emitted++;
    let clean: AuditEvent;
    try {
      clean = parseAuditEvent(this.opts.redact(event));
    } catch (err) {
      this.metrics.invalid++;
      // Codes and schema paths only: zod's text, and the event's own fields, can quote data.
      const reason: DeadLetterReason =
        err instanceof ZodError
          ? invalidEventReason(err)
          : { code: ERROR_CODES.auditEventInvalid, issues: [], more: 0 };
      this.opts.logger?.error({ reason: formatReason(reason) }, 'audit event refused');
      this.refuse(event, reason, waiter, new AuditEventNotDurableError(ERROR_CODES.auditEventInvalid));
      return;
    }
    if (this.held >= this.maxBuffered && !this.closed) {
      // Back-pressure: memory stays bounded, the event goes to the outbox instead of the queue.
      const bytes = eventBytes(clean);
      if (bytes === undefined) this.refuseUnserialisable(clean, waiter);
      else if (bytes > this.maxEventBytes) this.refuseOversized(clean, bytes, waiter);
      else this.track(this.toOutbox([clean], 'emitter over capacity').then((ok) => settle(waiter ? [waiter] : [], ok)));
      return;
    }
    // Serialised now: the batch holds its bytes, not the event, while it fills.
    const added = this.batch.add(clean);
    if ('oversized' in added) {
      this.refuseOversized(clean, added.oversized, waiter);
      return;
    }
    if ('unserialisable' in added) {
      this.refuseUnserialisable(clean, waiter);
      return;
    }
    this.held++;
    if (waiter) this.waiters.push(waiter);
    // Once closed, each event goes at once, a batch of its own.
    if (this.closed || this.batch.count >= this.maxBatch) this.flushBuffer();
    else this.timer ??= setTimeout(() => this.flushBuffer(), this.maxDelayMs);
  }

  /** Dead-letters one refused event (scrubbed like the writer's dead letters; `facts` are the library's numbers) and rejects its waiter. */
  private refuse(
    event: unknown,
    reason: DeadLetterReason,
    waiter: Waiter | undefined,
    err: Error,
    facts: Record<string, unknown> = {},
  ): void {
    const p = (async () => {
      try {
        await this.opts.pool.query(`insert into ${this.deadLetterTable} (event, reason) values ($1::jsonb, $2)`, [
          JSON.stringify(storable({ ...(deadLetterEvent(event, this.policy) as object), ...facts })),
          formatReason(reason),
        ]);
        this.metrics.deadLettered++;
      } catch (e) {
        this.metrics.dropped++;
        this.opts.logger?.error({ count: 1, err: errorLabel(e), reason: reason.code }, 'audit events lost');
      }
      waiter?.reject(err);
    })();
    this.track(p);
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
    if (this.batch.count === 0) return;
    const waiters = this.waiters;
    this.waiters = [];
    this.metrics.batches++;
    const batch = this.batch.take();
    const count = batch.eventIds.length;
    const p = auditBatchJobOf(batch, this.tagger)
      .then((job) => this.opts.queue.add(job.name, job.data, job.opts))
      .then(
        () => {
          this.metrics.enqueued += count;
          return true;
        },
        (err: Error) => this.bytesToOutbox(batch.json, count, `enqueue failed: ${errorLabel(err)}`),
      )
      .then((ok) => settle(waiters, ok));
    this.track(p, count);
  }

  /**
   * An event over `maxEventBytes` is refused alone: its shape (fields and size; no details, no
   * receipt) is dead-lettered with `AUDIT_EVENT_TOO_LARGE`, and its batch goes on without it.
   */
  private refuseOversized(event: AuditEvent, bytes: number, waiter: Waiter | undefined): void {
    this.metrics.tooLarge++;
    const limit = this.maxEventBytes;
    const reason = { code: ERROR_CODES.auditEventTooLarge, bytes, limit } as const;
    this.opts.logger?.error({ reason: formatReason(reason), eventId: event.eventId }, 'audit event refused');
    const err = new AuditEventNotDurableError(ERROR_CODES.auditEventTooLarge, { eventId: event.eventId, bytes, limit });
    this.refuse(shapeOf(event), reason, waiter, err, { tooLarge: { bytes, limit } });
  }

  /**
   * An event JSON cannot write (a value a custom `redact` let through: a bigint, a `toJSON` or a
   * getter that throws) is invalid, as the built-in redactor finds it: refused alone, its shape
   * (no details, no receipt: the value is in them) dead-lettered with `AUDIT_EVENT_INVALID`
   * (`not_serialisable`), and its batch goes on without it.
   */
  private refuseUnserialisable(event: AuditEvent, waiter: Waiter | undefined): void {
    this.metrics.invalid++;
    const reason: DeadLetterReason = {
      code: ERROR_CODES.auditEventInvalid,
      issues: [{ code: 'not_serialisable', path: '$' }],
      more: 0,
    };
    this.opts.logger?.error({ reason: formatReason(reason), eventId: event.eventId }, 'audit event refused');
    this.refuse(shapeOf(event), reason, waiter, new AuditEventNotDurableError(ERROR_CODES.auditEventInvalid));
  }

  /** {@link toOutbox} for a batch held as its JSON's bytes: the events read back as the writer would read them. */
  private bytesToOutbox(json: Buffer, count: number, reason: string): Promise<boolean> {
    let events: AuditEvent[];
    try {
      events = JSON.parse(json.toString('utf8'));
    } catch (err) {
      // Not reached (the bytes are JSON.stringify's): counted and logged all the same, never thrown.
      this.metrics.dropped += count;
      this.opts.logger?.error({ count, err: errorLabel(err), reason }, 'audit events lost');
      return Promise.resolve(false);
    }
    return this.toOutbox(events, reason);
  }

  /** True once the events are in the outbox; false when they are lost (counted and logged). */
  private async toOutbox(events: AuditEvent[], reason: string): Promise<boolean> {
    try {
      // Made storable first: the outbox is the last place these events can go.
      await writeOutboxBatch(this.opts.pool, this.schema, events, reason);
      this.metrics.outboxed += events.length;
      return true;
    } catch (err) {
      this.metrics.dropped += events.length;
      this.opts.logger?.error({ count: events.length, err: errorLabel(err), reason }, 'audit events lost');
      return false;
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

/** What a refused event's dead letter keeps of it when its details cannot be: every field but them and the receipt. */
function shapeOf(event: AuditEvent): Omit<AuditEvent, 'details' | 'redaction'> {
  const { details: _d, redaction: _r, ...shape } = event;
  return shape;
}

/** Resolves the waiters of a batch that became durable; rejects them when it was lost. */
function settle(waiters: readonly Waiter[], durable: boolean): void {
  if (waiters.length === 0) return;
  if (durable) for (const w of waiters) w.resolve();
  else {
    const err = new AuditEventNotDurableError(ERROR_CODES.auditEventLost);
    for (const w of waiters) w.reject(err);
  }
}
