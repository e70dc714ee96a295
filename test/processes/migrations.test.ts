import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { allMigrations } from '../../migrations/index.js';
import { MIGRATION_LOCK_TABLE, MIGRATION_TABLE, migrate } from '../../migrations/migrate.js';
import { eventsForRecord } from '../../src/audit/derive.js';
import { IdempotencyConfigError } from '../../src/errors/errors.js';
import { ERROR_CODES } from '../../src/errors/idempotency-error.js';
import type { LedgerRecord } from '../../src/ledger/types.js';
import { TestContext } from '../helpers/context.js';
import { nodeArgs } from '../helpers/spawn.js';

const t = new TestContext('migrations');
const root = fileURLToPath(new URL('../..', import.meta.url));
const childScript = fileURLToPath(new URL('../helpers/migrate-child.ts', import.meta.url));
const migrationNames = Object.keys(allMigrations('any_schema'));
const LEDGER = 'idempotency_ledger';
const AUDIT_TABLES = [
  'audit_backfill_checkpoint',
  'audit_chain_anchors',
  'audit_chains',
  'audit_dead_letter',
  'audit_event_ids',
  'audit_events',
  'audit_outbox',
  'audit_receipts',
];
const CONFIRMATIONS = 'idempotency_confirmations';
const INTENTS = 'idempotency_intents';
const LIBRARY_TABLES = [...AUDIT_TABLES, CONFIRMATIONS, INTENTS, LEDGER];
const LEDGER_INDEXES = ['idempotency_ledger_pkey', 'idempotency_ledger_sweep_idx', 'idempotency_ledger_task_idx'];
/** Schemas created by this file besides t.schema; dropped in afterAll. */
const extraSchemas: string[] = [];

afterAll(async () => {
  for (const schema of extraSchemas) await t.query(`drop schema if exists ${schema} cascade`);
  await t.teardown();
});

function extraSchema(suffix: string): string {
  const schema = `${t.schema}_${suffix}`;
  expect(schema).toMatch(/^[a-z_][a-z0-9_]{0,62}$/);
  extraSchemas.push(schema);
  return schema;
}

async function schemaExists(schema: string): Promise<boolean> {
  const r = await t.query('select 1 from information_schema.schemata where schema_name = $1', [schema]);
  return r.rowCount === 1;
}

/** Tables of a schema, partitions of a partitioned table left out (audit_events has one per day). */
async function tablesOf(schema: string): Promise<string[]> {
  const r = await t.query<{ table_name: string }>(
    `select table_name from information_schema.tables
     where table_schema = $1 and not coalesce((select relispartition from pg_class
       where oid = to_regclass(quote_ident(table_schema) || '.' || quote_ident(table_name))), false)
     order by table_name`,
    [schema],
  );
  return r.rows.map((row) => row.table_name).sort();
}

async function indexesOf(schema: string): Promise<string[]> {
  const r = await t.query<{ indexname: string }>(
    'select indexname from pg_indexes where schemaname = $1 and tablename = $2 order by indexname',
    [schema, LEDGER],
  );
  return r.rows.map((row) => row.indexname);
}

async function columnType(schema: string, column: string): Promise<string | undefined> {
  const r = await t.query<{ data_type: string }>(
    `select data_type from information_schema.columns where table_schema = $1 and table_name = $2 and column_name = $3`,
    [schema, LEDGER, column],
  );
  return r.rows[0]?.data_type;
}

/** Migrates down one migration at a time until `name` is reverted; the results of every step. */
async function downTo(schema: string, name: string): Promise<unknown[]> {
  const results: unknown[] = [];
  for (;;) {
    const step = (await migrate({ connectionString: t.databaseUrl, schema, to: 'down' })).results ?? [];
    results.push(...step);
    if (step.length === 0 || step.some((r) => r.migrationName === name)) return results;
  }
}

async function migrationRows(schema: string): Promise<{ name: string; n: number }[]> {
  const r = await t.query<{ name: string; n: number }>(
    `select name, count(*)::int as n from ${schema}.${MIGRATION_TABLE} group by name order by name`,
  );
  return r.rows;
}

async function migrationTableIn(schema: string): Promise<boolean> {
  const r = await t.query('select 1 from information_schema.tables where table_schema = $1 and table_name = $2', [
    schema,
    MIGRATION_TABLE,
  ]);
  return r.rowCount === 1;
}

const up = (name: string) => ({ migrationName: name, direction: 'Up', status: 'Success' });
const down = (name: string) => ({ migrationName: name, direction: 'Down', status: 'Success' });

describe('migrate up, down and up again', () => {
  it('creates the tables in the chosen schema, reverts them and re-creates them', async () => {
    const schema = t.schema;
    const publicHadMigrationTable = await migrationTableIn('public');
    expect(await schemaExists(schema)).toBe(false);

    const first = await migrate({ connectionString: t.databaseUrl, schema });
    expect(first.error).toBeUndefined();
    expect(first.results).toEqual(migrationNames.map(up));
    expect(await schemaExists(schema)).toBe(true);
    expect(await tablesOf(schema)).toEqual([MIGRATION_TABLE, MIGRATION_LOCK_TABLE, ...LIBRARY_TABLES].sort());
    expect(await indexesOf(schema)).toEqual(LEDGER_INDEXES);
    expect(await migrationRows(schema)).toEqual(migrationNames.map((name) => ({ name, n: 1 })));
    // The bookkeeping lives in the chosen schema only: nothing was added to public.
    expect(await migrationTableIn(schema)).toBe(true);
    expect(await migrationTableIn('public')).toBe(publicHadMigrationTable);

    // The ledger is usable: its checks accept a valid row.
    await t.query(
      `insert into ${schema}.${LEDGER} (key, namespace, resource_key, version, operation, fingerprint, status, epoch,
         downstream, retention_ms, last_transition, created_at, updated_at, claimed_at, claim_transition, sweep_after)
       values ('k', 'n', 'r', 'v', 'op', 'f', 'locked', 1, 'idempotent', 1000, 'claimed', now(), now(), now(), 'claimed', now())`,
    );
    await expect(
      t.query(
        `insert into ${schema}.${LEDGER} (key, namespace, resource_key, version, operation, fingerprint, status, epoch,
           downstream, retention_ms, last_transition, created_at, updated_at, claimed_at, claim_transition, sweep_after)
         values ('k2', 'n', 'r', 'v', 'op', 'f', 'bogus', 1, 'idempotent', 1000, 'claimed', now(), now(), now(), 'claimed', now())`,
      ),
    ).rejects.toThrow(/check constraint/);

    // A second run finds nothing to do.
    const again = await migrate({ connectionString: t.databaseUrl, schema });
    expect(again.results).toEqual([]);
    expect(await migrationRows(schema)).toEqual(migrationNames.map((name) => ({ name, n: 1 })));

    const none = await migrate({ connectionString: t.databaseUrl, schema, to: 'none' });
    expect(none.error).toBeUndefined();
    expect(none.results).toEqual([...migrationNames].reverse().map(down));
    expect(await tablesOf(schema)).toEqual([MIGRATION_TABLE, MIGRATION_LOCK_TABLE].sort());
    expect(await tablesOf(schema)).not.toContain(LEDGER);
    expect(await migrationRows(schema)).toEqual([]);

    const second = await migrate({ connectionString: t.databaseUrl, schema });
    expect(second.results).toEqual(migrationNames.map(up));
    expect(await tablesOf(schema)).toEqual([MIGRATION_TABLE, MIGRATION_LOCK_TABLE, ...LIBRARY_TABLES].sort());
    expect(await indexesOf(schema)).toEqual(LEDGER_INDEXES);
    expect(await migrationRows(schema)).toEqual(migrationNames.map((name) => ({ name, n: 1 })));
    // The re-created table is empty: down really dropped it.
    expect((await t.query(`select count(*)::int as n from ${schema}.${LEDGER}`)).rows[0]?.n).toBe(0);
  });

  const auditColumns = async (schema: string) =>
    (
      await t.query(
        `select column_name from information_schema.columns where table_schema = $1 and table_name = 'audit_events'`,
        [schema],
      )
    ).rows.map((r) => r.column_name as string);

  it("'down' reverts only the last migration", async () => {
    const schema = extraSchema('down');
    await migrate({ connectionString: t.databaseUrl, schema });
    const last = migrationNames[migrationNames.length - 1]!;
    const indexDefs = async () =>
      (
        await t.query(
          `select indexdef from pg_indexes where schemaname = $1 and tablename in ('audit_events', 'audit_event_ids')`,
          [schema],
        )
      ).rows.map((r) => (r.indexdef as string).replaceAll(`${schema}.`, ''));
    expect(await indexDefs()).toEqual(
      expect.arrayContaining([
        'CREATE INDEX audit_events_task_idx ON ONLY audit_events USING btree (hashtextextended(task_id, (0)::bigint)) WHERE (task_id IS NOT NULL)',
        'CREATE INDEX audit_events_operation_idx ON ONLY audit_events USING btree (hashtextextended(operation_id, (0)::bigint)) WHERE (operation_id IS NOT NULL)',
        'CREATE INDEX audit_event_ids_created_idx ON audit_event_ids USING brin (created_at)',
      ]),
    );
    const result = await migrate({ connectionString: t.databaseUrl, schema, to: 'down' });
    expect(result.results).toEqual([down(last)]);
    expect(await migrationRows(schema)).toEqual(migrationNames.slice(0, -1).map((name) => ({ name, n: 1 })));
    expect(await tablesOf(schema)).toContain(LEDGER);
    // 0020's 'down' (the last) put the text back into the timeline's indexes; 0019's put the
    // receipts back into the rows and dropped their table; 0018's took the batch links' column;
    // 0017's put the time back into the timeline's indexes and a B-tree on the event ids' time;
    // 0016's gave the ledger back its fillfactor of 90; 0015's took the seeded fold; 0014's the
    // digest version's column; 0013's the hash chains' tables; then 0011's the intents table.
    expect(last).toBe('0020-audit-hashed-lookups');
    expect(await indexDefs()).toEqual(
      expect.arrayContaining([
        'CREATE INDEX audit_events_task_idx ON ONLY audit_events USING btree (task_id) WHERE (task_id IS NOT NULL)',
        'CREATE INDEX audit_events_operation_idx ON ONLY audit_events USING btree (operation_id) WHERE (operation_id IS NOT NULL)',
      ]),
    );
    expect(await tablesOf(schema)).toContain('audit_receipts');
    expect(await downTo(schema, '0019-audit-receipts')).toEqual([down('0019-audit-receipts')]);
    expect(await tablesOf(schema)).not.toContain('audit_receipts');
    expect(await auditColumns(schema)).not.toContain('redaction_ref');
    expect(await downTo(schema, '0018-audit-chain-batch-link')).toEqual([down('0018-audit-chain-batch-link')]);
    expect(await auditColumns(schema)).not.toContain('chain_link');
    expect(await auditColumns(schema)).toContain('chain_v');
    expect(await downTo(schema, '0017-audit-slim-indexes')).toEqual([down('0017-audit-slim-indexes')]);
    expect(await indexDefs()).toEqual(
      expect.arrayContaining([
        'CREATE INDEX audit_events_task_idx ON ONLY audit_events USING btree (task_id, created_at) WHERE (task_id IS NOT NULL)',
        'CREATE INDEX audit_events_operation_idx ON ONLY audit_events USING btree (operation_id, created_at)',
        'CREATE INDEX audit_event_ids_created_idx ON audit_event_ids USING btree (created_at)',
      ]),
    );
    const fillfactor = async () =>
      (
        await t.query(`select array_to_string(reloptions, ',') as o from pg_class where oid = $1::regclass`, [
          `${schema}.${LEDGER}`,
        ])
      ).rows[0]?.o as string;
    expect(await fillfactor()).toBe('fillfactor=35');
    expect(await downTo(schema, '0016-ledger-hot-completions')).toEqual([down('0016-ledger-hot-completions')]);
    expect(await fillfactor()).toBe('fillfactor=90');
    expect(await downTo(schema, '0015-audit-chain-seeded')).toEqual([down('0015-audit-chain-seeded')]);
    const aggregates = async () =>
      (
        await t.query(
          `select p.proname from pg_proc p join pg_namespace n on n.oid = p.pronamespace where n.nspname = $1 and p.prokind = 'a'`,
          [schema],
        )
      ).rows.map((r) => r.proname as string);
    expect(await aggregates()).not.toContain('audit_chain_from');
    expect(await aggregates()).toContain('audit_chain');
    expect(await downTo(schema, '0014-audit-chain-version')).toEqual([down('0014-audit-chain-version')]);
    expect(await auditColumns(schema)).not.toContain('chain_v');
    expect(await auditColumns(schema)).toContain('chain_digest');
    expect(await downTo(schema, '0013-audit-chain')).toEqual([down('0013-audit-chain')]);
    expect(await tablesOf(schema)).not.toContain('audit_chains');
    expect(await auditColumns(schema)).not.toContain('chain_digest');
    expect(await downTo(schema, '0011-intents')).toEqual([down('0011-intents')]);
    expect(await tablesOf(schema)).not.toContain(INTENTS);
    expect(await downTo(schema, '0010-ledger-sweep-index')).toEqual([down('0010-ledger-sweep-index')]);
    // Step by step down to 0004, which makes event_id unique on its own: its 'down' drops that
    // index, the time-led primary key stays; 0007's drops the confirmations table; 0006's puts
    // the unpartitioned table back (with 0004's unique event_id index) and drops the id table.
    const unique = async () =>
      (
        await t.query(
          `select a.attname from pg_index i join pg_attribute a on a.attrelid = i.indrelid and a.attnum = any(i.indkey)
           where i.indrelid = $1::regclass and i.indisunique and not i.indisprimary`,
          [`${schema}.audit_events`],
        )
      ).rows.map((r) => r.attname);
    const ledgerColumns = async () =>
      (
        await t.query(
          `select column_name from information_schema.columns where table_schema = $1 and table_name = $2`,
          [schema, LEDGER],
        )
      ).rows.map((r) => r.column_name as string);
    const pk = async () =>
      (
        await t.query(
          `select a.attname from pg_index i join pg_attribute a on a.attrelid = i.indrelid and a.attnum = any(i.indkey)
           where i.indrelid = $1::regclass and i.indisprimary order by array_position(i.indkey, a.attnum)`,
          [`${schema}.audit_events`],
        )
      ).rows.map((r) => r.attname);
    const partitioned = async () =>
      (await t.query(`select relkind from pg_class where oid = $1::regclass`, [`${schema}.audit_events`])).rows[0]
        ?.relkind;
    // 0010's 'down' took the sweeper's sweep_after index and column; 0009's put the
    // text fingerprint back, 0008's the expiry index and the jsonb record; 0007's drops the
    // confirmations table.
    expect(await indexesOf(schema)).not.toContain('idempotency_ledger_sweep_idx');
    expect(await ledgerColumns()).not.toContain('sweep_after');
    expect(await columnType(schema, 'fingerprint')).toBe('bytea');
    expect(await downTo(schema, '0009-ledger-fingerprint-bytes')).toEqual([down('0009-ledger-fingerprint-bytes')]);
    expect(await columnType(schema, 'fingerprint')).toBe('text');
    expect(await downTo(schema, '0008-ledger-compact')).toEqual([down('0008-ledger-compact')]);
    expect(await indexesOf(schema)).toContain('idempotency_ledger_expires_idx');
    expect(await columnType(schema, 'transitions')).toBe('jsonb');
    expect(await downTo(schema, '0007-confirmations')).toEqual([down('0007-confirmations')]);
    expect(await tablesOf(schema)).not.toContain(CONFIRMATIONS);
    expect(await partitioned()).toBe('p');
    for (
      let i = migrationNames.indexOf('0006-audit-partitions');
      migrationNames[i + 1] !== '0004-audit-event-id-unique';
      i--
    ) {
      expect((await migrate({ connectionString: t.databaseUrl, schema, to: 'down' })).results).toEqual([
        down(migrationNames[i]!),
      ]);
      if (migrationNames[i] === '0006-audit-partitions') {
        expect(await partitioned()).toBe('r');
        expect(await unique()).toEqual(['event_id']);
        expect(await tablesOf(schema)).not.toContain('audit_event_ids');
      }
    }
    expect(await unique()).toEqual([]);
    expect(await pk()).toEqual(['created_at', 'event_id']);
    // 0005's 'down' took the ledger's record of transitions, and only that column.
    expect(await ledgerColumns()).not.toContain('transitions');
    expect(await ledgerColumns()).toContain('last_transition');
    await migrate({ connectionString: t.databaseUrl, schema });
    // Partitioned again: event ids unique in their own table, not on audit_events.
    expect(await unique()).toEqual([]);
    expect(await pk()).toEqual(['created_at', 'event_id']);
    expect(await partitioned()).toBe('p');
    expect(await tablesOf(schema)).toContain('audit_event_ids');
    expect(await ledgerColumns()).toContain('transitions');
    expect(await tablesOf(schema)).toContain(CONFIRMATIONS);
  });

  it('keeps two schemas independent', async () => {
    const a = extraSchema('ind_a');
    const b = extraSchema('ind_b');
    await migrate({ connectionString: t.databaseUrl, schema: a });
    await migrate({ connectionString: t.databaseUrl, schema: b });
    await migrate({ connectionString: t.databaseUrl, schema: a, to: 'none' });
    expect(await tablesOf(a)).not.toContain(LEDGER);
    expect(await tablesOf(b)).toContain(LEDGER);
    expect(await migrationRows(b)).toEqual(migrationNames.map((name) => ({ name, n: 1 })));
  });
});

describe('0008 and 0009: the compact ledger row', () => {
  it('converts rows written before it without losing any: same records, same derived events; down restores them', async () => {
    const schema = extraSchema('compact');
    await migrate({ connectionString: t.databaseUrl, schema });
    await downTo(schema, '0008-ledger-compact');
    const table = `${schema}.${LEDGER}`;
    const at = Date.parse('2026-01-02T03:04:05.678Z');
    // As the ledger wrote rows before 0008: a jsonb record of objects, every column filled.
    const record = [
      { t: 'claimed', e: 1, at, o: 'w1', j: '7', q: 'orders', k: 'task-7' },
      { t: 'failed_retryable', e: 1, at: at + 40, c: 'E_NET' },
      { t: 'reclaimed', e: 2, at: at + 1_000, o: 'w2', j: '7', q: 'orders' },
      { t: 'completed', e: 2, at: at + 1_250 },
      { t: 'invalidated', e: 3, at: at + 90_000, p: 'completed', a: 'alice', r: 'refund, issued "twice"' },
    ];
    const insert = `insert into ${table} (key, namespace, resource_key, version, operation, fingerprint, status, epoch,
      downstream, retention_ms, result, last_transition, job_id, queue, task_id, created_at, claimed_at, claim_transition,
      updated_at, completed_at, expires_at, transitions)
      values ($1, 'acme', $2, 'v1', 'pay', 'fp', $3, $4, 'idempotent', 60000, $5::jsonb, $6, '7', 'orders', 'task-7',
        to_timestamp($7 / 1000.0), to_timestamp($8 / 1000.0), 'reclaimed', to_timestamp($9 / 1000.0),
        to_timestamp($10 / 1000.0), to_timestamp($9 / 1000.0 + 60), $11::jsonb)`;
    await t.query(insert, [
      'acme:o%3A1:v1',
      'o:1',
      'invalidated',
      3,
      '{"ok":true}',
      'invalidated',
      at,
      at + 1_000,
      at + 90_000,
      at + 1_250,
      JSON.stringify(record),
    ]);
    // A row from before 0005: no record at all.
    await t.query(insert, [
      'acme:o%3A2:v1',
      'o:2',
      'completed',
      1,
      '{"n":2}',
      'completed',
      at,
      at,
      at + 5,
      at + 5,
      null,
    ]);
    const before = (await t.query(`select * from ${table} order by key`)).rows;

    await migrate({ connectionString: t.databaseUrl, schema });
    expect(await columnType(schema, 'transitions')).toBe('text');
    expect(await columnType(schema, 'fingerprint')).toBe('bytea');
    expect(await indexesOf(schema)).toEqual(LEDGER_INDEXES);
    const ledger = t.ledger({ schema });
    try {
      const converted = await ledger.get('acme:o%3A1:v1');
      expect(converted?.transitions).toEqual([
        {
          transition: 'claimed',
          epoch: 1,
          at: new Date(at),
          owner: 'w1',
          jobId: '7',
          queue: 'orders',
          taskId: 'task-7',
        },
        { transition: 'failed_retryable', epoch: 1, at: new Date(at + 40), errorCode: 'E_NET' },
        { transition: 'reclaimed', epoch: 2, at: new Date(at + 1_000), owner: 'w2', jobId: '7', queue: 'orders' },
        { transition: 'completed', epoch: 2, at: new Date(at + 1_250) },
        {
          transition: 'invalidated',
          epoch: 3,
          at: new Date(at + 90_000),
          previousStatus: 'completed',
          actorId: 'alice',
          reason: 'refund, issued "twice"',
        },
      ]);
      expect(converted).toMatchObject({
        namespace: 'acme',
        resourceKey: 'o:1',
        lastTransition: 'invalidated',
        claimTransition: 'reclaimed',
        claimedAt: new Date(at + 1_000),
        createdAt: new Date(at),
        completedAt: new Date(at + 1_250),
        expiresAt: new Date(at + 150_000),
      });
      const legacy = await ledger.get('acme:o%3A2:v1');
      expect(legacy).toMatchObject({ transitions: null, lastTransition: 'completed', status: 'completed' });
      // The record is what the backfill derives from: one event per recorded transition.
      expect(eventsForRecord(converted as LedgerRecord).map((e) => [e.action, e.epoch, e.createdAt])).toEqual(
        record.map((r) => [expect.any(String), r.e, new Date(r.at).toISOString()]),
      );
    } finally {
      await ledger.close();
    }

    // Down: the jsonb record, the text fingerprint and every column as before.
    await downTo(schema, '0008-ledger-compact');
    const after = (await t.query(`select * from ${table} order by key`)).rows;
    expect(after).toEqual(before);

    await migrate({ connectionString: t.databaseUrl, schema });
    const again = t.ledger({ schema });
    try {
      // A transition after the conversion appends to the converted record.
      const claim = await again.claim({
        key: { namespace: 'acme', resourceKey: 'o:1', version: 'v1' },
        operation: 'pay',
        fingerprint: 'fp2',
        leaseMs: 1_000,
        retentionMs: 60_000,
        downstream: 'idempotent',
      });
      expect(claim).toMatchObject({ kind: 'acquired', epoch: 4, transition: 'reclaimed_after_invalidation' });
      const appended = (await again.get('acme:o%3A1:v1'))?.transitions ?? [];
      expect(appended.map((e) => [e.transition, e.epoch])).toEqual([
        ...record.map((r) => [r.t, r.e]),
        ['reclaimed_after_invalidation', 4],
      ]);
      expect(appended.at(-1)?.at.getTime()).toBe(claim.at.getTime());
    } finally {
      await again.close();
    }
  });
});

type ChildOutcome = { code: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string };

/** Starts one migrate process; `ready` resolves once it has loaded and waits for the start signal. */
function startChild(connectionString: string, schema: string) {
  const child: ChildProcessWithoutNullStreams = spawn(
    process.execPath,
    [...nodeArgs(childScript), connectionString, schema],
    { cwd: root, stdio: 'pipe' },
  );
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8');
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (d: string) => {
    stderr += d;
  });
  const ready = new Promise<void>((resolve, reject) => {
    child.stdout.on('data', (d: string) => {
      stdout += d;
      if (stdout.startsWith('ready\n')) resolve();
    });
    child.once('error', reject);
    child.once('close', (code) =>
      reject(new Error(`migrate child exited with ${code} before it was ready: ${stderr}`)),
    );
  });
  const done = new Promise<ChildOutcome>((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (code, signal) => resolve({ code, signal, stdout, stderr }));
  });
  return { child, ready, done };
}

describe('migrate beside DDL elsewhere in the database', () => {
  it('is not failed by tables and columns another session creates and drops in its own schema meanwhile', async () => {
    const schema = extraSchema('beside');
    const other = extraSchema('churn');
    await t.query(`create schema ${other}`);
    const churn = t.pool(1);
    let stop = false;
    let changes = 0;
    // Another application changing its own tables, as fast as it can: a table with many columns
    // created, a column dropped, the table dropped.
    const columns = Array.from({ length: 40 }, (_, i) => `c${i} serial`).join(', ');
    const churning = (async () => {
      for (let i = 0; !stop; i++) {
        await churn.query(`create table ${other}.t${i % 4} (${columns})`);
        await churn.query(`alter table ${other}.t${i % 4} drop column c7`);
        await churn.query(`drop table ${other}.t${i % 4}`);
        changes++;
      }
    })();
    try {
      const results = [];
      for (let i = 0; i < 3; i++) {
        results.push((await migrate({ connectionString: t.databaseUrl, schema })).results?.length);
        results.push((await migrate({ connectionString: t.databaseUrl, schema, to: 'down' })).results?.length);
      }
      expect(results).toEqual([migrationNames.length, 1, 1, 1, 1, 1]);
      expect(changes).toBeGreaterThan(0);
    } finally {
      stop = true;
      await churning;
      await churn.end();
    }
  }, 120_000);
});

describe('concurrent migrate from separate OS processes', () => {
  it('finds the script the child processes run', () => {
    expect(existsSync(childScript)).toBe(true);
    expect(existsSync(nodeArgs(childScript).at(-1) as string)).toBe(true);
  });

  it.each([
    ['a schema that does not exist yet', 'conc_new', false],
    ['an existing empty schema', 'conc_empty', true],
  ])('4 processes migrating %s: all exit 0, the migrations apply once', async (_what, suffix, precreate) => {
    const schema = extraSchema(suffix);
    if (precreate) await t.query(`create schema ${schema}`);
    expect(await schemaExists(schema)).toBe(precreate);
    expect(await tablesOf(schema)).toEqual([]);

    // Children connect under their own application_name, so the file's leak check only sees this process.
    const url = new URL(inject('databaseUrl'));
    url.searchParams.set('application_name', `${t.tag}_child`);
    const children = Array.from({ length: 4 }, () => startChild(url.toString(), schema));
    try {
      await Promise.all(children.map((c) => c.ready));
      // Every process has loaded; release them together.
      for (const c of children) c.child.stdin.end('go\n');
      const outcomes = await Promise.all(children.map((c) => c.done));

      expect(outcomes.map((o) => ({ code: o.code, stderr: o.code === 0 ? '' : o.stderr }))).toEqual(
        outcomes.map(() => ({ code: 0, stderr: '' })),
      );
      const results = outcomes.map((o) => {
        const lines = o.stdout.trim().split('\n');
        expect(lines[0]).toBe('ready');
        return JSON.parse(lines[lines.length - 1]!) as unknown[];
      });
      // Exactly one process applied the migrations; the others found nothing to do.
      expect(results.filter((r) => r.length > 0)).toEqual([migrationNames.map(up)]);
      expect(results.filter((r) => r.length === 0)).toHaveLength(3);
    } finally {
      for (const c of children) {
        if (c.child.exitCode === null && c.child.signalCode === null) c.child.kill();
      }
    }

    expect(await migrationRows(schema)).toEqual(migrationNames.map((name) => ({ name, n: 1 })));
    const total = await t.query<{ n: number }>(`select count(*)::int as n from ${schema}.${MIGRATION_TABLE}`);
    expect(total.rows[0]?.n).toBe(migrationNames.length);
    expect(await tablesOf(schema)).toEqual([MIGRATION_TABLE, MIGRATION_LOCK_TABLE, ...LIBRARY_TABLES].sort());
    expect(await indexesOf(schema)).toEqual(LEDGER_INDEXES);
  });
});

describe('schema name validation', () => {
  it.each(['bad-name;drop', 'public; drop table x', 'Public', '1abc', '', 'a b', 'sch"ema', 'a'.repeat(64)])(
    'refuses %j before connecting, with IDEMPOTENCY_CONFIG',
    async (schema) => {
      // Nothing listens on port 1: a connection attempt would fail with ECONNREFUSED instead.
      const err = await migrate({ connectionString: 'postgres://postgres@127.0.0.1:1/none', schema }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(IdempotencyConfigError);
      expect((err as IdempotencyConfigError).code).toBe('IDEMPOTENCY_CONFIG');
      expect((err as IdempotencyConfigError).code).toBe(ERROR_CODES.config);
      expect((err as IdempotencyConfigError).details.option).toBe('schema');
    },
  );

  it("refuses 'bad-name;drop' against the real database and creates nothing", async () => {
    await expect(migrate({ connectionString: t.databaseUrl, schema: 'bad-name;drop' })).rejects.toMatchObject({
      code: 'IDEMPOTENCY_CONFIG',
      details: { option: 'schema' },
    });
    const r = await t.query("select nspname from pg_namespace where nspname in ('bad-name;drop', 'bad-name', 'bad')");
    expect(r.rows).toEqual([]);
  });

  it('accepts the longest plain identifier (63 characters)', async () => {
    const schema = extraSchema('x'.repeat(62 - t.schema.length));
    expect(schema).toHaveLength(63);
    const result = await migrate({ connectionString: t.databaseUrl, schema });
    expect(result.results).toEqual(migrationNames.map(up));
    expect(await migrationTableIn(schema)).toBe(true);
  });
});
