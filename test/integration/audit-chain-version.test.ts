import type pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { migrate } from '../../migrations/migrate.js';
import { AuditStore } from '../../src/audit/audit-store.js';
import { CHAIN_DIGEST_VERSION, eventDigestSql, GENESIS_SQL } from '../../src/audit/chain-sql.js';
import { auditInsertSql } from '../../src/audit/insert-statement.js';
import { createAuditPartitions } from '../../src/audit/partitions.js';
import { verifyAuditChains } from '../../src/audit/verify-chain.js';
import { defineRedactionPolicy } from '../../src/redaction/define-policy.js';
import { sampleAuditEvent } from '../helpers/audit-sample.js';
import { TestContext } from '../helpers/context.js';

const t = new TestContext('audit-chain-version');
let pool: pg.Pool;
const policy = defineRedactionPolicy({
  version: 'chain-v-1',
  hmacKeys: [{ id: 'k1', secret: 'an-audit-chain-version-test-key-of-32-bytes' }],
});
/** Events whose columns hold what a record's text form must quote: commas, quotes, parentheses, spaces, empty strings. */
const event = (i: number) => ({
  ...sampleAuditEvent('chain-version', String(i)),
  reasonCode: i % 2 ? 'policy.ok' : undefined,
  details: { note: i % 2 ? 'a "quoted", (odd) value' : '', n: i },
});

beforeAll(async () => {
  await t.setup();
  pool = t.pool(4);
  // Back to before the chain (the migrations after it, 0015, 0014, then 0013 reverted), and
  // events stored as they were then.
  const columns = async () =>
    (
      await t.query(
        `select column_name from information_schema.columns where table_schema = $1 and table_name = 'audit_events'`,
        [t.schema],
      )
    ).rows.map((r) => r.column_name as string);
  for (let i = 0; i < 10 && (await columns()).includes('chain_digest'); i++) {
    await migrate({ connectionString: t.databaseUrl, schema: t.schema, to: 'down' });
  }
  expect(await columns()).not.toContain('chain_digest');
  expect(await columns()).toContain('event_id');
  await createAuditPartitions(pool, t.schema, new Date(Date.now() - 86_400_000), new Date(Date.now() + 86_400_000));
  const stored = await pool.query(auditInsertSql(t.schema, 'plain', false), [
    JSON.stringify(Array.from({ length: 6 }, (_, i) => event(i))),
  ]);
  expect(stored.rowCount).toBe(6);
  // Then the library upgraded: 0013 chains them (digest version 1), 0014 records that version.
  await migrate({ connectionString: t.databaseUrl, schema: t.schema });
});
afterAll(async () => {
  await pool.end();
  await t.teardown();
});

const verify = () => verifyAuditChains(pool, t.schema);
const versions = async () =>
  (
    await t.query(
      `select chain_slot as slot, chain_v as v, count(*)::int as n from ${t.schema}.audit_events group by 1, 2 order by 1, 2`,
    )
  ).rows;
const eventOf = async (v: number) =>
  (
    await t.query(
      `select event_id, reason_code from ${t.schema}.audit_events where chain_v = $1 order by chain_seq offset 2 limit 1`,
      [v],
    )
  ).rows[0] as { event_id: string; reason_code: string | null };

it('a chain written before the digest version was recorded verifies under version 1, and goes on under the current one', async () => {
  expect(await versions()).toEqual([{ slot: 0, v: 1, n: 6 }]);
  expect((await verify()).problems).toEqual([]);
  const store = new AuditStore(pool, t.schema, policy, { chainSlots: 1 });
  expect((await store.writeBatch(Array.from({ length: 5 }, (_, i) => event(10 + i)))).inserted).toBe(5);
  await store.close();
  // One chain, its first six events under version 1, the next five under the current version.
  expect(await versions()).toEqual([
    { slot: 0, v: 1, n: 6 },
    { slot: 0, v: CHAIN_DIGEST_VERSION, n: 5 },
  ]);
  const r = await verify();
  expect(r.problems).toEqual([]);
  expect(r).toMatchObject({ ok: true, events: 11, chains: 1 });
});

it('a changed event is found under either version, and so is a changed version', async () => {
  const changed = async (eventId: string) => {
    const r = await verify();
    expect(r.ok).toBe(false);
    expect(r.problems[0]).toMatchObject({ kind: 'changed', eventId });
  };
  for (const v of [1, CHAIN_DIGEST_VERSION]) {
    const e = await eventOf(v);
    await t.query(`update ${t.schema}.audit_events set reason_code = 'policy.changed' where event_id = $1`, [
      e.event_id,
    ]);
    await changed(e.event_id);
    await t.query(`update ${t.schema}.audit_events set reason_code = $2 where event_id = $1`, [
      e.event_id,
      e.reason_code,
    ]);
    expect((await verify()).problems).toEqual([]);
    // The row's version switched: its digest under the other version is not what was chained.
    await t.query(`update ${t.schema}.audit_events set chain_v = $2 where event_id = $1`, [
      e.event_id,
      v === 1 ? CHAIN_DIGEST_VERSION : 1,
    ]);
    await changed(e.event_id);
    // A version this code does not know.
    await t.query(`update ${t.schema}.audit_events set chain_v = 99 where event_id = $1`, [e.event_id]);
    await changed(e.event_id);
    await t.query(`update ${t.schema}.audit_events set chain_v = $2 where event_id = $1`, [e.event_id, v]);
    expect((await verify()).problems).toEqual([]);
  }
});

it("a chain whose events were chained under version 2 (the columns' record text) verifies, and a change in one is found", async () => {
  // Rewrites the chain as the store wrote it under version 2: the events after the version-1
  // ones digested from their record text, every link folded again from the chain's start.
  const s = t.schema;
  await t.query(`update ${s}.audit_events set chain_v = 2 where chain_v = ${CHAIN_DIGEST_VERSION}`);
  await t.query(`with r as (
      select chain_seq as ord, event_id, created_at,
        case chain_v when 1 then ${eventDigestSql('e', 1)} else ${eventDigestSql('e', 2)} end as d
      from ${s}.audit_events e where chain_slot = 0
      union all select 0, null, null, ${GENESIS_SQL}
    ),
    f as (select r.*, ${s}.audit_chain(r.d) over (order by r.ord) as link from r)
    update ${s}.audit_events e set chain_digest = f.link from f
    where f.ord > 0 and e.event_id = f.event_id and e.created_at = f.created_at`);
  await t.query(`update ${s}.audit_chains c set digest = e.chain_digest from ${s}.audit_events e
    where e.chain_slot = 0 and e.chain_seq = c.seq and c.slot = 0`);
  expect(await versions()).toEqual([
    { slot: 0, v: 1, n: 6 },
    { slot: 0, v: 2, n: 5 },
  ]);
  expect((await verify()).problems).toEqual([]);
  const e = await eventOf(2);
  await t.query(`update ${s}.audit_events set reason_code = 'policy.changed' where event_id = $1`, [e.event_id]);
  const r = await verify();
  expect(r.problems[0]).toMatchObject({ kind: 'changed', eventId: e.event_id });
});
