/**
 * A batch of new events is stored without reading `audit_event_ids` (the fresh insert, see
 * src/audit/insert-statement.ts). A batch holding an id stored before is stored again by the
 * insert that checks each id against that table, under a named statement whose plan was made
 * while the table was nearly empty: once the table has grown, the store has it analyzed, and such
 * batches find their ids through its index instead of reading it whole (see
 * src/db/statistics-refresh.ts).
 */
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AuditStore } from '../../src/audit/audit-store.js';
import { STATISTICS_CHECKS_AT } from '../../src/db/statistics-refresh.js';
import { sampleAuditEvent } from '../helpers/audit-sample.js';
import { TestContext, waitFor } from '../helpers/context.js';
import { rowEstimate, tableScans } from '../helpers/table-stats.js';

const t = new TestContext('audit_young');
let pool: pg.Pool;
let store: AuditStore;

beforeAll(async () => {
  await t.setup();
  // One connection: every batch runs on the session whose cached plan is under test.
  pool = t.pool(1);
  store = new AuditStore(pool, t.schema);
});
afterAll(async () => {
  await pool.end();
  await t.teardown();
});

const BATCH = 50;
let written = 1;

/** The first event written (alone): a batch given `again` holds it too, so its ids are looked up. */
const first = sampleAuditEvent('young', '0');

/** Writes `n` new events in batches of `batch`; with `again`, each batch also holds {@link first}, stored before. */
async function write(n: number, batch = BATCH, again = false): Promise<void> {
  for (let done = 0; done < n; done += batch) {
    const events = Array.from({ length: Math.min(batch, n - done) }, () =>
      sampleAuditEvent('young', String(written++)),
    );
    const res = await store.writeBatch(again ? [...events, first] : events);
    expect(res.inserted).toBe(events.length);
  }
}

const scans = () => tableScans(t, pool, 'audit_event_ids');

describe('a young audit_event_ids table', () => {
  it('once it has grown past the checks, batches no longer read it whole', async () => {
    expect(await store.writeBatch([first])).toMatchObject({ inserted: 1 });
    // Plans of the looking-up insert made on a nearly empty table: five custom plans, then the
    // cached generic one. The first batch is tried fresh and falls back; the store then looks the
    // ids of the next ones up first.
    const lookedUp = store.lookedUp;
    for (let i = 0; i < 8; i++) await write(BATCH, BATCH, true);
    expect(store.lookedUp - lookedUp).toBe(1);
    // Past the check at 100,000: below some 20,000 to 35,000 ids, reading them whole is the
    // cheapest plan even with fresh statistics (see statistics-refresh.ts).
    const at = 100_000;
    expect(STATISTICS_CHECKS_AT).toContain(at);
    await write(at + 500, 1_000);
    await waitFor(
      async () => (await rowEstimate(t, 'audit_event_ids')) >= at,
      `audit_event_ids analyzed once ${at} ids were stored`,
      30_000,
    );

    // Batches holding an id stored before: found through the index.
    const before = await scans();
    await write(20 * BATCH, BATCH, true);
    const after = await scans();
    expect(after.idx - before.idx).toBeGreaterThan(0);
    expect(after.seq - before.seq).toBe(0);
    // Batches of new events: after the first (looked up, as the batches before it held a stored
    // id), the table is not read at all.
    await write(BATCH);
    const next = await scans();
    await write(20 * BATCH);
    const fresh = await scans();
    expect(fresh.idx - next.idx).toBe(0);
    expect(fresh.seq - next.seq).toBe(0);
  }, 120_000);
});
