/**
 * A lease keeper whose claim's row disappears (a restore, a promoted asynchronous standby): its
 * renewal meets a lost record, not a takeover. It stops renewing and leaves the processor running
 * (the signal does not fire, past the lease's end too): the outcome meets the lost record when it
 * is written, and is recorded as such. A takeover still aborts.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { PostgresLedger } from '../../src/ledger/postgres-ledger.js';
import { LeaseKeeper } from '../../src/worker/lease-keeper.js';
import { TestContext, waitFor } from '../helpers/context.js';
import { acquireClaim, payClaim } from '../helpers/ledger-claims.js';

const t = new TestContext('lease_keeper_lost');
let ledger: PostgresLedger;
const LEASE_MS = 300;

beforeAll(async () => {
  await t.setup();
  ledger = t.ledger({ batching: false });
});
afterAll(async () => {
  await ledger.close();
  await t.teardown();
});

describe('a lease keeper whose record is lost', () => {
  it('stops renewing without aborting the processor; the ledger counts the lost record', async () => {
    const claim = await acquireClaim(ledger, payClaim(`keeper:${Math.random()}`, { leaseMs: LEASE_MS }));
    const keeper = new LeaseKeeper({ ledger, key: claim.key, epoch: claim.epoch, leaseMs: LEASE_MS, granted: claim });
    const signal = keeper.signal;
    try {
      const lostBefore = ledger.metrics.lostRecords;
      await t.query(`delete from ${t.schema}.idempotency_ledger where key = $1`, [claim.key]);
      // The next renewal (every lease/3) finds the row gone.
      await waitFor(() => ledger.metrics.lostRecords > lostBefore, 'a renewal to meet the lost record', 5_000);
      const counted = ledger.metrics.lostRecords;
      // Three leases later: no abort, and no renewal was sent again.
      const until = Date.now() + 3 * LEASE_MS;
      await waitFor(() => Date.now() >= until || signal.aborted, 'three leases to pass', 5_000);
      expect(signal.aborted).toBe(false);
      expect(keeper.lost).toBeUndefined();
      expect(ledger.metrics.lostRecords).toBe(counted);
    } finally {
      keeper.stop();
    }
  });

  it('a takeover still aborts it (the row moved on to a later epoch)', async () => {
    const claim = await acquireClaim(ledger, payClaim(`keeper:${Math.random()}`, { leaseMs: LEASE_MS }));
    const keeper = new LeaseKeeper({ ledger, key: claim.key, epoch: claim.epoch, leaseMs: LEASE_MS, granted: claim });
    const signal = keeper.signal;
    try {
      await ledger.invalidate(claim.key, { actorId: 'test', reason: 'takeover' });
      await waitFor(() => signal.aborted, 'the signal to fire', 5_000);
      expect(keeper.lost?.reason).toBe('lease_taken_over');
    } finally {
      keeper.stop();
    }
  });
});
