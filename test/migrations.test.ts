import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { allMigrations } from '../migrations/index.js';
import { MIGRATION_LOCK_TABLE, MIGRATION_TABLE, migrate } from '../src/db/migrate.js';
import { IdempotencyConfigError } from '../src/errors/errors.js';
import { ERROR_CODES } from '../src/errors/idempotency-error.js';
import { TestContext } from './helpers/context.js';
import { nodeArgs } from './helpers/spawn.js';

const t = new TestContext('migrations');
const root = fileURLToPath(new URL('..', import.meta.url));
const childScript = fileURLToPath(new URL('./helpers/migrate-child.ts', import.meta.url));
const migrationNames = Object.keys(allMigrations('any_schema'));
const LEDGER = 'idempotency_ledger';
const AUDIT_TABLES = [
  'audit_backfill_checkpoint',
  'audit_dead_letter',
  'audit_event_ids',
  'audit_events',
  'audit_outbox',
];
const CONFIRMATIONS = 'idempotency_confirmations';
const LIBRARY_TABLES = [...AUDIT_TABLES, CONFIRMATIONS, LEDGER];
const LEDGER_INDEXES = ['idempotency_ledger_expires_idx', 'idempotency_ledger_pkey', 'idempotency_ledger_task_idx'];
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
         downstream, retention_ms, last_transition, created_at, updated_at, claimed_at, claim_transition)
       values ('k', 'n', 'r', 'v', 'op', 'f', 'locked', 1, 'idempotent', 1000, 'claimed', now(), now(), now(), 'claimed')`,
    );
    await expect(
      t.query(
        `insert into ${schema}.${LEDGER} (key, namespace, resource_key, version, operation, fingerprint, status, epoch,
           downstream, retention_ms, last_transition, created_at, updated_at, claimed_at, claim_transition)
         values ('k2', 'n', 'r', 'v', 'op', 'f', 'bogus', 1, 'idempotent', 1000, 'claimed', now(), now(), now(), 'claimed')`,
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

  it("'down' reverts only the last migration", async () => {
    const schema = extraSchema('down');
    await migrate({ connectionString: t.databaseUrl, schema });
    const last = migrationNames[migrationNames.length - 1]!;
    const result = await migrate({ connectionString: t.databaseUrl, schema, to: 'down' });
    expect(result.results).toEqual([down(last)]);
    expect(await migrationRows(schema)).toEqual(migrationNames.slice(0, -1).map((name) => ({ name, n: 1 })));
    expect(await tablesOf(schema)).toContain(LEDGER);
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
    expect(await tablesOf(schema)).not.toContain(CONFIRMATIONS);
    expect(await partitioned()).toBe('p');
    for (let i = migrationNames.length - 2; migrationNames[i + 1] !== '0004-audit-event-id-unique'; i--) {
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
