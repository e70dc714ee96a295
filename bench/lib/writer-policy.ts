/**
 * Preloaded (`--import`) into the writer process by `bench:audit`: the writer holds events to the
 * bench's redaction policy (its second pass, `storeRedactor`) and checks audit batch tags
 * (src/audit/batch-tag.ts) against it, as a deployment's writer does when it has the emitters'
 * own policy. The policy's key comes from the bench process (`BENCH_AUDIT_POLICY_KEY`, hex).
 * Never loaded outside the benchmark.
 */
import { AuditStore } from '../../src/audit/audit-store.js';
import { batchTagHolds } from '../../src/audit/batch-tag.js';
import { storeRedactor } from '../../src/audit/redact-event.js';
import { benchPolicy } from './bench-policy.js';

const key = process.env.BENCH_AUDIT_POLICY_KEY;
if (!key) throw new Error('BENCH_AUDIT_POLICY_KEY is not set');
const policy = benchPolicy(Buffer.from(key, 'hex'));
const structure = storeRedactor(policy);

type StoreInside = { structure: typeof structure };
const proto = AuditStore.prototype;
const writeBatch = proto.writeBatch;
proto.writeBatch = function (this: AuditStore, raw, json, redacted) {
  (this as unknown as StoreInside).structure = structure;
  return writeBatch.call(this, raw, json, redacted);
};
proto.trustsBatch = (data: unknown, events: number): boolean => {
  const d = data as { count?: unknown; payload?: unknown; tag?: unknown } | null;
  if (typeof d?.payload !== 'string' || d.count !== events) return false;
  return batchTagHolds(policy, d.tag, events, d.payload);
};
