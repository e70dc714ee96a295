/**
 * Preloaded (`--import`) into the writer process by `bench:audit` when `BENCH_AUDIT_PIPELINE=chained`:
 * the audit store then stores each batch as the library does, hash chain and receipts included
 * (the writer's digests and times of every event, the store's chained statement, its retries),
 * and nothing else: no check of the events, no second redaction, no tag read. With the guarded
 * transport floor's emitter (each event redacted, then batched and queued, no check), it is the
 * least a pipeline that redacts on the worker's side and keeps a tamper-evident trail costs on
 * this design. Never loaded outside the benchmark.
 */
import type { AuditEvent } from '../../src/audit/audit-event.js';
import { AuditStore } from '../../src/audit/audit-store.js';

type StoreInside = {
  insert(json: string | Buffer, chain: unknown): Promise<number>;
  digests(events: readonly AuditEvent[]): unknown;
};

(AuditStore.prototype as unknown as { writeBatch: unknown }).writeBatch = async function (
  this: StoreInside,
  raw: unknown[],
  json?: string | Buffer,
) {
  const events = raw as AuditEvent[];
  const inserted = await this.insert(json ?? JSON.stringify(events), this.digests(events));
  return { inserted, duplicates: raw.length - inserted, deadLettered: 0 };
};
