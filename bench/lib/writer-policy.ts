/**
 * Preloaded (`--import`) into the writer process by `bench:audit`: the writer's store holds the
 * bench's redaction policy in place of its own, for its second pass (`storeRedactor`) and for the
 * audit batch tags it checks (src/audit/batch-tag.ts), as a deployment's writer does when it has
 * the emitters' own policy. The policy's key comes from the bench process
 * (`BENCH_AUDIT_POLICY_KEY`, hex). Never loaded outside the benchmark.
 */
import { AuditStore } from '../../src/audit/audit-store.js';
import { storeRedactor } from '../../src/audit/redact-event.js';
import { benchPolicy } from './bench-policy.js';

const key = process.env.BENCH_AUDIT_POLICY_KEY;
if (!key) throw new Error('BENCH_AUDIT_POLICY_KEY is not set');
const policy = benchPolicy(Buffer.from(key, 'hex'));
const structure = storeRedactor(policy);

/** The store's private policy and the second pass made from it, replaced by the bench's. */
const adopt = (store: AuditStore) => Object.assign(store, { policy, structure });

const proto = AuditStore.prototype;
const { writeBatch, trustsBatch } = proto;
proto.writeBatch = function (this: AuditStore, ...args) {
  return writeBatch.apply(adopt(this), args);
};
proto.trustsBatch = function (this: AuditStore, ...args) {
  return trustsBatch.apply(adopt(this), args);
};
