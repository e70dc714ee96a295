import type pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { eventIdFor } from '../../src/audit/audit-event.js';
import { AuditStore } from '../../src/audit/audit-store.js';
import { verifyAuditChains } from '../../src/audit/verify-chain.js';
import { benchToolEvent } from '../helpers/audit-sample.js';
import { TestContext } from '../helpers/context.js';
import { tableScans } from '../helpers/table-stats.js';

/*
 * `verify` walks a day's chains in chain order, which no index gives: the day's events are read
 * and sorted once, however many pages the walk takes. (Read page by page, each page a query of its
 * own, every page scanned and sorted the whole day again: a day of a million events would be read
 * two hundred times.)
 */

const t = new TestContext('audit-verify-reads');
let pool: pg.Pool;
/** More than two pages of the walk (5,000 rows each). */
const N = 12_000;
const day = '2026-03-14';
const partition = `audit_events_p${day.replaceAll('-', '')}`;

beforeAll(async () => {
  await t.setup();
  pool = t.pool(2);
  const store = new AuditStore(pool, t.schema);
  const noon = Date.parse(`${day}T12:00:00Z`);
  for (let i = 0; i < N; i += 500) {
    const batch = Array.from({ length: 500 }, (_, j) => ({
      ...benchToolEvent(eventIdFor('verify-reads', i + j), `task-${(i + j) % 40}`, i + j),
      createdAt: new Date(noon + i + j).toISOString(),
    }));
    await store.writeBatch(batch);
  }
});
afterAll(async () => {
  await pool.end();
  await t.teardown();
});

it('reads a day of events in two passes however many pages its walk takes: one to list the days, one to walk them', async () => {
  const before = await tableScans(t, pool, partition);
  const r = await verifyAuditChains(pool, t.schema);
  const after = await tableScans(t, pool, partition);
  expect(r.problems).toEqual([]);
  expect(r).toMatchObject({ ok: true, events: N });
  expect(after.rows - before.rows).toBe(2 * N);
});

it('walks the same way through a connection outside any transaction', async () => {
  const client = await pool.connect();
  try {
    const r = await verifyAuditChains(client, t.schema);
    expect(r.problems).toEqual([]);
    expect(r).toMatchObject({ ok: true, events: N });
    // Nothing is left open on the connection.
    expect((await client.query('select count(*)::int as n from pg_cursors')).rows[0].n).toBe(0);
  } finally {
    client.release();
  }
});

it('a walk that fails part way leaves no cursor behind, and the next walk on the same connection is whole', async () => {
  const client = await pool.connect();
  try {
    let fetches = 0;
    const failing = {
      query: (text: string, values?: unknown[]) => {
        if (text.startsWith('fetch') && ++fetches === 2) return Promise.reject(new Error('connection lost'));
        return client.query(text, values);
      },
    };
    await expect(verifyAuditChains(failing, t.schema)).rejects.toThrow('connection lost');
    expect((await client.query('select count(*)::int as n from pg_cursors')).rows[0].n).toBe(0);
    const r = await verifyAuditChains(client, t.schema);
    expect(r).toMatchObject({ ok: true, events: N });
  } finally {
    client.release();
  }
});
