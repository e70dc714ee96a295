import type { Queue } from 'bullmq';
import type pg from 'pg';
import { Counter, Gauge, Registry } from 'prom-client';
import { untilAborted } from '../config/abort.js';
import { DEFAULT_METRICS_PREFIX } from './metrics.js';

/** Figures read from Postgres and Redis are reused for this long (one ledger scan per period). */
export const DEFAULT_SNAPSHOT_MAX_AGE_MS = 10_000;

/** Delayed and failed audit batches looked at for the oldest one (the waiting list is ordered). */
const SCANNED_BATCHES = 1_000;

/** Longest a scrape waits for the figures before it answers with what it has. */
const SNAPSHOT_TIMEOUT_MS = 5_000;

const STATUSES = ['locked', 'completed', 'failed', 'unknown', 'released', 'invalidated'] as const;

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
  byStatus: Record<string, number>;
  oldestLeaseSeconds: number;
  expiredLeases: number;
  outboxBatches: number;
  outboxEvents: number;
  deadLetters: number;
  auditLagSeconds: number;
  auditQueue: Record<'waiting' | 'delayed' | 'active' | 'failed', number>;
};

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
    const gauge = (name: string, help: string, set: (g: Gauge, s: Snapshot) => void, labelNames: string[] = []) =>
      new Gauge({
        name: `${p}${name}`,
        help,
        labelNames,
        registers,
        async collect() {
          const s = await read();
          if (s) set(this, s);
        },
      });
    gauge(
      'ledger_records',
      'Ledger rows by status',
      (g, s) => {
        for (const status of STATUSES) g.set({ status }, s.byStatus[status] ?? 0);
      },
      ['status'],
    );
    gauge('unknown_records', 'Operations whose outcome is unknown, waiting for an operator', (g, s) =>
      g.set(s.byStatus.unknown ?? 0),
    );
    gauge('oldest_lease_seconds', 'Age of the oldest locked claim', (g, s) => g.set(s.oldestLeaseSeconds));
    gauge('expired_leases', 'Locked rows whose lease has run out', (g, s) => g.set(s.expiredLeases));
    gauge('audit_lag_seconds', 'Age of the oldest audit event not yet written to Postgres', (g, s) =>
      g.set(s.auditLagSeconds),
    );
    gauge(
      'audit_queue_batches',
      'Audit batches in the audit queue, by state',
      (g, s) => {
        for (const [state, n] of Object.entries(s.auditQueue)) g.set({ state }, n);
      },
      ['state'],
    );
    gauge('audit_outbox_batches', 'Audit batches waiting in the Postgres outbox', (g, s) => g.set(s.outboxBatches));
    gauge('audit_outbox_events', 'Audit events waiting in the Postgres outbox', (g, s) => g.set(s.outboxEvents));
    gauge('audit_dead_letters', 'Rows in audit_dead_letter', (g, s) => g.set(s.deadLetters));
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
    const { pool, schema: s, auditQueue } = this.options;
    const [ledger, outbox, dead, pending] = await Promise.all([
      pool.query(
        // One scan: the locked group's oldest claim and expired leases are read from its row.
        `select status, count(*)::int8 as n, extract(epoch from now() - min(claimed_at))::float8 as oldest,
           count(*) filter (where lease_expires_at <= now())::int8 as expired
         from ${s}.idempotency_ledger group by status`,
      ),
      pool.query(
        `select count(*)::int8 as batches, coalesce(sum(jsonb_array_length(events)), 0)::int8 as events,
           extract(epoch from now() - min(created_at))::float8 as oldest from ${s}.audit_outbox`,
      ),
      pool.query(`select count(*)::int8 as n from ${s}.audit_dead_letter`),
      pendingBatches(auditQueue),
    ]);
    const byStatus: Record<string, number> = {};
    let oldestLeaseSeconds = 0;
    let expiredLeases = 0;
    for (const r of ledger.rows) {
      byStatus[r.status] = Number(r.n);
      if (r.status === 'locked') {
        oldestLeaseSeconds = Number(r.oldest ?? 0);
        expiredLeases = Number(r.expired);
      }
    }
    const o = outbox.rows[0];
    const outboxAge = Number(o?.oldest ?? 0);
    const queueAge = pending.oldestTimestamp === undefined ? 0 : (Date.now() - pending.oldestTimestamp) / 1000;
    return {
      byStatus,
      oldestLeaseSeconds,
      expiredLeases,
      outboxBatches: Number(o?.batches ?? 0),
      outboxEvents: Number(o?.events ?? 0),
      deadLetters: Number(dead.rows[0]?.n ?? 0),
      auditLagSeconds: Math.max(0, outboxAge, queueAge),
      auditQueue: pending.counts,
    };
  }
}

/**
 * The audit queue's batches not yet written, by state, and the creation time of the oldest:
 * the waiting list's tail (the next to run), every active batch, and the first
 * {@link SCANNED_BATCHES} delayed and failed ones (a batch delayed by an outage is not
 * necessarily first in its set), read as one field per job.
 */
async function pendingBatches(queue: Queue): Promise<{
  counts: Record<'waiting' | 'delayed' | 'active' | 'failed', number>;
  oldestTimestamp: number | undefined;
}> {
  const client = await queue.backend.client;
  const [counts, waitTail, active, delayed, failed] = await Promise.all([
    queue.getJobCounts('waiting', 'delayed', 'active', 'failed'),
    client.lrange(queue.toKey('wait'), -1, -1),
    client.lrange(queue.toKey('active'), 0, -1),
    client.zrange(queue.toKey('delayed'), 0, SCANNED_BATCHES - 1),
    client.zrange(queue.toKey('failed'), 0, SCANNED_BATCHES - 1),
  ]);
  const ids = [...waitTail, ...active, ...delayed, ...failed];
  let oldestTimestamp: number | undefined;
  if (ids.length > 0) {
    const stamps = await Promise.all(ids.map((id) => client.hget(queue.toKey(id), 'timestamp')));
    for (const t of stamps) {
      const n = Number(t);
      if (t !== null && Number.isFinite(n) && (oldestTimestamp === undefined || n < oldestTimestamp)) {
        oldestTimestamp = n;
      }
    }
  }
  return {
    counts: {
      waiting: counts.waiting ?? 0,
      delayed: counts.delayed ?? 0,
      active: counts.active ?? 0,
      failed: counts.failed ?? 0,
    },
    oldestTimestamp,
  };
}
