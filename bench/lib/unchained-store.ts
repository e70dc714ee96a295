/**
 * Preloaded (`--import`) into the writer process by `bench:audit` when `BENCH_AUDIT_CHAIN=off`:
 * the audit store then writes each batch with the same statement without the hash chain
 * (`auditInsertSql(…, chained = false)`), so that one sitting measures what the chain costs.
 * Never loaded outside the benchmark.
 */
import { AuditStore, isReceiptMissing } from '../../src/audit/audit-store.js';
import { auditInsertSql } from '../../src/audit/insert-statement.js';
import { runStatement } from '../../src/db/prepared-statements.js';

type StoreInside = {
  pool: import('pg').Pool;
  schema: string;
  freshSql: string;
  absorbingSql: string;
  chained(name: string | undefined, text: string, json: string | Buffer): Promise<number>;
  digests(events: readonly unknown[]): { digests: Buffer; micros: string[] };
};

const proto = AuditStore.prototype as unknown as StoreInside;
// Nor the writer's part of the chain (its digests and the times they cover).
proto.digests = () => ({ digests: Buffer.alloc(0), micros: [] });
proto.chained = async function (this: StoreInside, name, text, json) {
  // Receipts stored once, as the store does (a receipt stored meanwhile by a concurrent insert: again).
  const mode = text === this.freshSql ? 'fresh' : text === this.absorbingSql ? 'absorbing' : 'plain';
  const unchained = auditInsertSql(this.schema, mode, false, true);
  try {
    return (await runStatement(this.pool, name, unchained, [json])).rowCount ?? 0;
  } catch (err) {
    if (!isReceiptMissing(err)) throw err;
    return (await runStatement(this.pool, name, unchained, [json])).rowCount ?? 0;
  }
};
