/**
 * The audit trail's transport floor, for `npm run bench:audit`'s wrapper rounds: an audit sink
 * that does what any emitter on this design must do on the worker's side, and nothing else. Each
 * wrapper event is made into its audit event (`auditEventFromWrapper`, as the emitter makes it),
 * written into the batch's bytes (`BatchBytes`, as the emitter writes it) and sent as one deflated
 * BullMQ job per 500 events or 50 ms (`auditBatchJobOf`, the emitter's defaults); a tool
 * decision's promise settles when its batch is added, as `recordDurable`'s does. No redaction, no
 * schema check, no size limit, no outbox: `1 − floor/off` is the share of the worker's rate that
 * making and queueing the events costs before any of those. Given `redact` (the emitter's
 * redactor), each event is redacted before it is written, and nothing else is added: the guarded
 * transport floor, what an emitter that redacts on the worker's side costs at least.
 */
import type { Queue } from 'bullmq';
import type { AuditEvent } from '../../src/audit/audit-event.js';
import { auditBatchJobOf, BatchBytes } from '../../src/audit/batch-codec.js';
import { auditEventFromWrapper } from '../../src/audit/from-wrapper.js';
import type { WrapperEvent } from '../../src/shared/wrapper-event.js';

const MAX_BATCH = 500;
const MAX_DELAY_MS = 50;

export class AuditTransportFloor {
  private readonly batch = new BatchBytes(Number.MAX_SAFE_INTEGER);
  private waiters: (() => void)[] = [];
  private timer: NodeJS.Timeout | undefined;
  private readonly inFlight = new Set<Promise<unknown>>();
  /** Events added to the queue. */
  enqueued = 0;
  private held = 0;

  constructor(
    private readonly queue: Queue,
    private readonly actorId = `worker:${process.pid}`,
    private readonly redact?: (event: AuditEvent) => AuditEvent,
  ) {}

  emit(event: WrapperEvent): void | Promise<void> {
    this.add(auditEventFromWrapper(event, this.actorId));
    let durable: Promise<void> | undefined;
    if (event.type === 'decision' || event.type === 'confirmation')
      durable = new Promise<void>((resolve) => this.waiters.push(resolve));
    this.flushWhenDue();
    return durable;
  }

  /** Takes a ready audit event (`bench:audit`'s pipeline floor), fire-and-forget: written and queued as `emit` does. */
  record(event: AuditEvent): void {
    this.add(event);
    this.flushWhenDue();
  }

  /** Events taken and not yet added to the queue (the emitter's `buffered`). */
  get buffered(): number {
    return this.held;
  }

  /** Sends what is buffered and waits for every batch in flight. */
  async flush(): Promise<void> {
    await this.close();
  }

  private add(event: AuditEvent): void {
    const added = this.batch.add(this.redact ? this.redact(event) : event);
    if (!('added' in added))
      throw new Error(`transport floor: an event was not serialisable (${JSON.stringify(added)})`);
    this.held++;
  }

  private flushWhenDue(): void {
    if (this.batch.count >= MAX_BATCH) this.flushBuffer();
    else this.timer ??= setTimeout(() => this.flushBuffer(), MAX_DELAY_MS);
  }

  private flushBuffer(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    if (this.batch.count === 0) return;
    const [batch, waiters] = [this.batch.take(), this.waiters];
    this.waiters = [];
    const p = auditBatchJobOf(batch)
      .then((job) => this.queue.add(job.name, job.data, job.opts))
      .then(() => {
        this.enqueued += batch.eventIds.length;
        this.held -= batch.eventIds.length;
        for (const w of waiters) w();
      });
    this.inFlight.add(p);
    // Settled here either way; a rejection reaches close(), which awaits `p` itself.
    p.then(
      () => this.inFlight.delete(p),
      () => {},
    );
  }

  /** Sends what is buffered and waits for every batch in flight (a failed add rejects here). */
  async close(): Promise<void> {
    this.flushBuffer();
    while (this.inFlight.size > 0) await Promise.all([...this.inFlight]);
  }
}
