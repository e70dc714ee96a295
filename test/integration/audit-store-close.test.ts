/**
 * A write can start a statistics check of `audit_event_ids` in the background (an ANALYZE as the
 * table grows, see src/db/statistics-refresh.ts): `AuditStore.close()` waits for it, so the pool
 * can be ended after it, and the audit writer's `close()` waits for its store.
 */
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AuditStore } from '../../src/audit/audit-store.js';
import { STATISTICS_CHECKS_AT } from '../../src/db/statistics-refresh.js';
import { sampleAuditEvent } from '../helpers/audit-sample.js';
import { TestContext } from '../helpers/context.js';
import { rowEstimate } from '../helpers/table-stats.js';

const t = new TestContext('audit_close');
let pool: pg.Pool;

beforeAll(async () => {
  await t.setup();
  pool = t.pool(2);
  // Only the store's check analyzes the table here (autovacuum's would race the assertion).
  await t.query(`alter table ${t.schema}.audit_event_ids set (autovacuum_enabled = false)`);
});
afterAll(async () => {
  await pool.end();
  await t.teardown();
});

describe('AuditStore.close', () => {
  it('returns once the statistics check the last write started has analyzed the table', async () => {
    const first = STATISTICS_CHECKS_AT[0];
    const store = new AuditStore(pool, t.schema);
    const events = Array.from({ length: first }, (_, i) => sampleAuditEvent('close', String(i)));
    expect(await rowEstimate(t, 'audit_event_ids')).toBeLessThan(first);
    // The write that reaches the first threshold starts the check and returns without it.
    expect((await store.writeBatch(events)).inserted).toBe(first);
    await store.close();
    expect(await rowEstimate(t, 'audit_event_ids')).toBeGreaterThanOrEqual(first);
    // Still usable after close.
    expect((await store.writeBatch([sampleAuditEvent('close', 'after')])).inserted).toBe(1);
  });
});
