import { checkSchema } from '../db/connection.js';
import { IdempotencyConfigError } from '../errors/errors.js';

/**
 * Time partitions of `audit_events` (range on `created_at`, one partition per UTC day by
 * default). The operations process keeps them: partitions are created ahead of the clock, and with
 * a retention the partitions wholly older than it are dropped (DROP TABLE: no mass DELETE, no
 * dead rows, no vacuum debt). The event-id table that keeps one stored row per event id
 * (`audit_event_ids`) is pruned below the oldest partition kept, in bounded batches.
 *
 * An event whose time has no partition (far ahead of the clock, or older than every partition)
 * makes the store create its partition on the spot: nothing is refused for its time.
 */

const DAY_MS = 86_400_000;

export type AuditPartitionOptions = {
  /** Days per partition. @defaultValue 1 */
  partitionDays?: number;
  /** Partitions kept ready ahead of the current one. @defaultValue 7 */
  ahead?: number;
  /**
   * How long events are kept, in ms: partitions whose whole range is older are dropped. Undefined:
   * events are kept for ever.
   */
  retentionMs?: number;
  /** Event ids pruned per statement. @defaultValue 10 000 */
  pruneBatch?: number;
  /** Upper bound of prune statements per run. @defaultValue 100 */
  maxPruneBatches?: number;
};

export type AuditPartitionResult = { created: string[]; dropped: string[]; idsPruned: number };

/** What partitions.ts needs of a connection: a pg Pool or Client, or a wrapper of a kysely instance. */
export type SqlRunner = {
  query(text: string, values?: unknown[]): Promise<{ rows: Record<string, unknown>[]; rowCount: number | null }>;
};

/** A partition's range: [from, to), UTC. */
export type PartitionRange = { name: string; from: Date; to: Date };

function checkOptions(o: AuditPartitionOptions): Required<Omit<AuditPartitionOptions, 'retentionMs'>> {
  const partitionDays = o.partitionDays ?? 1;
  const ahead = o.ahead ?? 7;
  const pruneBatch = o.pruneBatch ?? 10_000;
  const maxPruneBatches = o.maxPruneBatches ?? 100;
  for (const [option, v, min] of [
    ['partitionDays', partitionDays, 1],
    ['ahead', ahead, 0],
    ['pruneBatch', pruneBatch, 1],
    ['maxPruneBatches', maxPruneBatches, 1],
  ] as const) {
    if (!Number.isSafeInteger(v) || v < min) {
      throw new IdempotencyConfigError(`${option} must be an integer >= ${min}`, { option });
    }
  }
  if (o.retentionMs !== undefined && !(Number.isFinite(o.retentionMs) && o.retentionMs > 0)) {
    throw new IdempotencyConfigError('retentionMs must be a positive number of milliseconds', {
      option: 'retentionMs',
    });
  }
  return { partitionDays, ahead, pruneBatch, maxPruneBatches };
}

/** The partition holding time `at`: aligned to multiples of `partitionDays` UTC days since the epoch. */
export function partitionFor(at: Date, partitionDays = 1): PartitionRange {
  const span = partitionDays * DAY_MS;
  const from = new Date(Math.floor(at.getTime() / span) * span);
  const to = new Date(from.getTime() + span);
  const name = `audit_events_p${from.toISOString().slice(0, 10).replaceAll('-', '')}`;
  return { name, from, to };
}

/** Partitions (existing) of the schema's audit_events, oldest first, from their bounds. */
export async function listAuditPartitions(
  db: SqlRunner,
  schema: string,
  parent = 'audit_events',
): Promise<PartitionRange[]> {
  const s = checkSchema(schema);
  const res = await db.query(
    `select c.relname as name, pg_get_expr(c.relpartbound, c.oid) as bound
     from pg_inherits i join pg_class c on c.oid = i.inhrelid
     where i.inhparent = to_regclass($1)`,
    [`${s}.${parent}`],
  );
  const out: PartitionRange[] = [];
  for (const row of res.rows as unknown as { name: string; bound: string }[]) {
    const m = /FROM \('([^']+)'\) TO \('([^']+)'\)/.exec(row.bound);
    if (m) out.push({ name: row.name, from: new Date(m[1]!), to: new Date(m[2]!) });
  }
  return out.sort((a, b) => a.from.getTime() - b.from.getTime());
}

/**
 * The audit retention's horizon, on the database clock: the start of the partition the
 * retention's cutoff falls in. An event older than it is in a partition that
 * {@link maintainAuditPartitions} drops with these options (or has dropped), so what waits for
 * events (the sweeper) or sends them again (the sweeper, the backfill) treats it as stored: past
 * the audit retention the trail keeps no event, whatever the ledger keeps. Undefined without a
 * retention (events are kept for ever, and every one is waited for).
 */
export async function auditHorizon(db: SqlRunner, options: AuditPartitionOptions = {}): Promise<Date | undefined> {
  if (options.retentionMs === undefined) return undefined;
  const o = checkOptions(options);
  const now = new Date((await db.query('select now() as now')).rows[0]?.now as Date);
  return partitionFor(new Date(now.getTime() - options.retentionMs), o.partitionDays).from;
}

/**
 * Creates the partitions covering [from, to) that do not exist yet (concurrent callers are safe:
 * `if not exists`, and a range another caller just created is skipped). Returns the names created.
 * `parent`: the partitioned table (the migration builds it under another name first).
 */
export async function createAuditPartitions(
  db: SqlRunner,
  schema: string,
  from: Date,
  to: Date,
  partitionDays = 1,
  parent = 'audit_events',
): Promise<string[]> {
  const s = checkSchema(schema);
  if (!/^[a-z_][a-z0-9_]*$/.test(parent))
    throw new IdempotencyConfigError('bad partitioned table name', { option: 'parent' });
  const existing = new Set((await listAuditPartitions(db, s, parent)).map((p) => p.name));
  const created: string[] = [];
  for (let p = partitionFor(from, partitionDays); p.from < to; p = partitionFor(p.to, partitionDays)) {
    if (existing.has(p.name)) continue;
    try {
      await db.query(
        `create table if not exists ${s}.${p.name} partition of ${s}.${parent}
         for values from ('${p.from.toISOString()}') to ('${p.to.toISOString()}')`,
      );
      created.push(p.name);
    } catch (err) {
      // 42P07 / 42P17: another process created it (or an overlapping one) meanwhile.
      const code = (err as { code?: unknown }).code;
      if (code !== '42P07' && code !== '42P17' && code !== '23505') throw err;
    }
  }
  return created;
}

/**
 * The operations process's maintenance of the audit trail's storage (the sweeper job calls it each
 * run): partitions created for the current period and `ahead` more; with `retentionMs`, partitions
 * that end before now − retention dropped, then event ids older than the oldest partition kept
 * pruned (bounded batches; the rest next run). Times come from the database clock.
 */
export async function maintainAuditPartitions(
  db: SqlRunner,
  schema: string,
  options: AuditPartitionOptions = {},
): Promise<AuditPartitionResult> {
  const s = checkSchema(schema);
  const o = checkOptions(options);
  const now = new Date((await db.query('select now() as now')).rows[0]?.now as Date);
  const span = o.partitionDays * DAY_MS;
  const created = await createAuditPartitions(
    db,
    s,
    now,
    new Date(partitionFor(now, o.partitionDays).to.getTime() + o.ahead * span),
    o.partitionDays,
  );
  const dropped: string[] = [];
  let idsPruned = 0;
  if (options.retentionMs !== undefined) {
    const cutoff = new Date(now.getTime() - options.retentionMs);
    for (const p of await listAuditPartitions(db, s)) {
      if (p.to > cutoff) continue;
      // The chains of the partition's days end here: their heads become anchors, from which
      // `verifyAuditChains` (and a day written again) starts.
      await db.query(
        `with gone as (
           delete from ${s}.audit_chains where day >= $1::date and day < $2::date returning day, slot, seq, digest
         )
         insert into ${s}.audit_chain_anchors (day, slot, seq, digest, partition)
         select day, slot, seq, digest, $3 from gone
         on conflict (day, slot) do update
           set seq = excluded.seq, digest = excluded.digest, partition = excluded.partition, dropped_at = now()`,
        [p.from.toISOString().slice(0, 10), p.to.toISOString().slice(0, 10), p.name],
      );
      await db.query(`drop table if exists ${s}.${p.name}`);
      dropped.push(p.name);
    }
    // Ids below the oldest partition kept (or the cutoff's partition) have no row left.
    const kept = (await listAuditPartitions(db, s))[0]?.from ?? partitionFor(cutoff, o.partitionDays).from;
    for (let i = 0; i < o.maxPruneBatches; i++) {
      const res = await db.query(
        `delete from ${s}.audit_event_ids where event_id in (
           select event_id from ${s}.audit_event_ids where created_at < $1 limit $2)`,
        [kept.toISOString(), o.pruneBatch],
      );
      idsPruned += res.rowCount ?? 0;
      if ((res.rowCount ?? 0) < o.pruneBatch) break;
    }
  }
  return { created, dropped, idsPruned };
}
