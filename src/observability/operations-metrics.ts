import type { Queue } from 'bullmq';
import type pg from 'pg';
import { Counter, Gauge, Registry } from 'prom-client';
import { type AuditQueueCounts, auditBacklog } from '../audit/audit-backlog.js';
import { deadLetterStats } from '../audit/dead-letters.js';
import { untilAborted } from '../config/abort.js';
import { ConfirmationStore } from '../confirm/confirmation-store.js';
import { LEDGER_STATUSES, ledgerStats } from '../ledger/scans.js';
import type { LedgerStatus } from '../ledger/types.js';
import { DEFAULT_METRICS_PREFIX } from './metrics.js';

/** Figures read from Postgres and Redis are reused for this long (one ledger scan per period). */
export const DEFAULT_SNAPSHOT_MAX_AGE_MS = 10_000;

/** Longest a scrape waits for the figures before it answers with what it has. */
const SNAPSHOT_TIMEOUT_MS = 5_000;

export type OperationsMetricsOptions = {
  pool: pg.Pool;
  schema: string;
  /** The audit queue the writer consumes: its pending batches make the audit lag. */
  auditQueue: Queue;
  registry?: Registry;
  /** @defaultValue {@link DEFAULT_SNAPSHOT_MAX_AGE_MS} */
  maxAgeMs?: number;
  /** @defaultValue `'bullmq_idempotency_'` */
  prefix?: string;
};

type Snapshot = {
  byStatus: Record<LedgerStatus, number>;
  oldestLeaseSeconds: number;
  expiredLeases: number;
  outboxBatches: number;
  outboxEvents: number;
  deadLetters: number;
  auditLagSeconds: number;
  auditQueue: AuditQueueCounts;
  pendingConfirmations: number;
  oldestConfirmationSeconds: number;
};

/** A figure of the snapshot, or one per value of the gauge's label. */
type Figure = (s: Snapshot) => number | Iterable<readonly [string, number]>;

/** The gauges of the snapshot's figures: name (after the prefix), help, figure, label. */
const GAUGES: readonly (readonly [string, string, Figure, string?])[] = [
  [
    'ledger_records',
    'Ledger rows by status',
    (s) => LEDGER_STATUSES.map((status) => [status, s.byStatus[status]] as const),
    'status',
  ],
  ['unknown_records', 'Operations whose outcome is unknown, waiting for an operator', (s) => s.byStatus.unknown],
  ['oldest_lease_seconds', 'Age of the oldest locked claim', (s) => s.oldestLeaseSeconds],
  ['expired_leases', 'Locked rows whose lease has run out', (s) => s.expiredLeases],
  ['audit_lag_seconds', 'Age of the oldest audit event not yet written to Postgres', (s) => s.auditLagSeconds],
  ['audit_queue_batches', 'Audit batches in the audit queue, by state', (s) => Object.entries(s.auditQueue), 'state'],
  ['audit_outbox_batches', 'Audit batches waiting in the Postgres outbox', (s) => s.outboxBatches],
  ['audit_outbox_events', 'Audit events waiting in the Postgres outbox', (s) => s.outboxEvents],
  ['audit_dead_letters', 'Rows in audit_dead_letter', (s) => s.deadLetters],
  ['pending_confirmations', 'Confirmation requests waiting for an answer', (s) => s.pendingConfirmations],
  [
    'oldest_pending_confirmation_seconds',
    'How long the oldest pending confirmation request has waited',
    (s) => s.oldestConfirmationSeconds,
  ],
];

/**
 * The operations process's Prometheus metrics: the ledger, the audit pipeline and this process's
 * writer. Figures from Postgres and Redis are read at scrape time, at most once per `maxAgeMs`
 * (counting the ledger's rows per status is a scan):
 *
 * - `bullmq_idempotency_ledger_records{status}`; `…_unknown_records` (operations waiting for an operator)
 * - `…_oldest_lease_seconds` (age of the oldest `locked` claim), `…_expired_leases`
 * - `…_audit_lag_seconds`: age of the oldest audit event not yet written (the oldest batch still
 *   in the audit queue, waiting, delayed, active or failed, or in the Postgres outbox); 0 when
 *   everything is written
 * - `…_audit_queue_batches{state}`, `…_audit_outbox_batches`, `…_audit_outbox_events`,
 *   `…_audit_dead_letters` (rows in `audit_dead_letter`)
 * - `…_pending_confirmations` (`ctx.confirm()` requests waiting for a person),
 *   `…_oldest_pending_confirmation_seconds` (how long the oldest has waited; 0 when none waits)
 * - `…_figures_up`: 0 when the last read of those figures failed (they are then stale)
 * - counters of this process: `…_audit_batches_total{result}`, `…_audit_events_total{result}`
 *   (`inserted`, `duplicate`, `dead_lettered`)
 */
export class OperationsMetrics {
  readonly registry: Registry;
  private snapshot: { at: number; value: Promise<Snapshot> } | undefined;
  private readonly batches: Counter<'result'>;
  private readonly events: Counter<'result'>;

  constructor(private readonly options: OperationsMetricsOptions) {
    this.registry = options.registry ?? new Registry();
    const p = options.prefix ?? DEFAULT_METRICS_PREFIX;
    const registers = [this.registry];
    let up = 0;
    const read = async () => {
      const snapshot = await this.read();
      up = snapshot ? 1 : 0;
      return snapshot;
    };
    for (const [name, help, figure, label] of GAUGES)
      new Gauge({
        name: `${p}${name}`,
        help,
        labelNames: label ? [label] : [],
        registers,
        async collect() {
          const s = await read();
          if (!s) return;
          const f = figure(s);
          if (typeof f === 'number') this.set(f);
          else for (const [value, n] of f) this.set({ [label as string]: value }, n);
        },
      });
    new Gauge({
      name: `${p}figures_up`,
      help: 'Whether the last scrape could read the ledger and audit figures (0: they are stale)',
      registers,
      async collect() {
        await read();
        this.set(up);
      },
    });
    this.batches = new Counter({
      name: `${p}audit_batches_total`,
      help: 'Audit batches this process wrote, by result (written, dead_lettered: some events refused)',
      labelNames: ['result'],
      registers,
    });
    this.events = new Counter({
      name: `${p}audit_events_total`,
      help: 'Audit events this process handled, by result (inserted, duplicate, dead_lettered)',
      labelNames: ['result'],
      registers,
    });
  }

  /** Counts one batch the writer finished. */
  batchWritten(r: { inserted: number; duplicates: number; deadLettered: number }): void {
    this.batches.inc({ result: r.deadLettered > 0 ? 'dead_lettered' : 'written' });
    if (r.inserted > 0) this.events.inc({ result: 'inserted' }, r.inserted);
    if (r.duplicates > 0) this.events.inc({ result: 'duplicate' }, r.duplicates);
    if (r.deadLettered > 0) this.events.inc({ result: 'dead_lettered' }, r.deadLettered);
  }

  /** The text exposition, for `/metrics`. */
  async render(): Promise<{ contentType: string; body: string }> {
    return { contentType: this.registry.contentType, body: await this.registry.metrics() };
  }

  /** The figures, read again when older than `maxAgeMs`; undefined when they cannot be read. */
  private async read(): Promise<Snapshot | undefined> {
    const maxAge = this.options.maxAgeMs ?? DEFAULT_SNAPSHOT_MAX_AGE_MS;
    if (!this.snapshot || Date.now() - this.snapshot.at > maxAge) {
      const value = Promise.race([this.take(), untilAborted(AbortSignal.timeout(SNAPSHOT_TIMEOUT_MS))]);
      this.snapshot = { at: Date.now(), value };
      // A failed read is not kept: the next scrape tries again.
      value.catch(() => {
        if (this.snapshot?.value === value) this.snapshot = undefined;
      });
    }
    return this.snapshot.value.catch(() => undefined);
  }

  private async take(): Promise<Snapshot> {
    const { pool, schema, auditQueue } = this.options;
    const [ledger, backlog, dead, confirmations] = await Promise.all([
      ledgerStats(pool, schema),
      auditBacklog(pool, schema, auditQueue),
      deadLetterStats(pool, schema),
      new ConfirmationStore(pool, schema).pending(),
    ]);
    const lease = ledger.oldestLease;
    return {
      byStatus: ledger.byStatus,
      oldestLeaseSeconds: lease ? Math.max(0, ledger.at.getTime() - lease.claimedAt.getTime()) / 1000 : 0,
      expiredLeases: ledger.expiredLeases,
      outboxBatches: backlog.outbox.batches,
      outboxEvents: backlog.outbox.events,
      deadLetters: dead.count,
      auditLagSeconds: backlog.lagMs / 1000,
      auditQueue: backlog.queue ?? { waiting: 0, delayed: 0, active: 0, failed: 0 },
      pendingConfirmations: confirmations.count,
      oldestConfirmationSeconds: confirmations.oldestAt
        ? Math.max(0, confirmations.readAt.getTime() - confirmations.oldestAt.getTime()) / 1000
        : 0,
    };
  }
}
