/**
 * Preloaded (`--import`) into the writer process by `bench:audit` when `BENCH_AUDIT_PIPELINE=floor`
 * or `guarded`:
 * the audit store then stores each batch's text with the fresh floor's statement
 * (audit-store-floors.ts: the rows and one row per event id, taken to be new as the store's first
 * statement takes them, nothing else), without checking its
 * events, redacting them again or computing the chain's digests. The writer still takes each
 * job off the queue and decodes it (inflate, JSON.parse) as it does. Never loaded outside the
 * benchmark.
 */
import { AuditStore } from '../../src/audit/audit-store.js';
import { freshFloorSql } from './audit-store-floors.js';

type StoreInside = { pool: import('pg').Pool; schema: string };

(AuditStore.prototype as unknown as { writeBatch: unknown }).writeBatch = async function (
  this: StoreInside,
  raw: unknown[],
  json?: string | Buffer,
) {
  const res = await this.pool.query({
    name: `bench_floor_${this.schema}`,
    text: freshFloorSql(this.schema),
    values: [json ?? JSON.stringify(raw)],
  });
  const inserted = res.rowCount ?? 0;
  return { inserted, duplicates: raw.length - inserted, deadLettered: 0 };
};
