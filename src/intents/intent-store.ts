import { sha256 } from '../fingerprint/sha256.js';
import type { IntentExecutor } from './executor.js';

/** One intent as `enqueue` records it and the relay adds it: everything BullMQ needs for the job. */
export type IntentRow = {
  /** The bounded operation key, as the ledger's primary key spells it. */
  key: string;
  operation: string;
  queue: string;
  jobId: string;
  /** The job's name (the operation's). */
  jobName: string;
  /** The envelope as BullMQ carries it: declared sensitive input already sealed. */
  data: unknown;
  /** The job options, `jobId` included. */
  opts: Record<string, unknown>;
  taskId?: string | undefined;
};

/** A recorded intent the relay looks at. */
export type DueIntent = IntentRow & { relayedAt: Date | null; readds: number; acceptedAt: Date };

/**
 * The channel a recording in a transaction notifies, per schema: `NOTIFY` is delivered on commit
 * only, so a relay that listens adds the job as soon as the caller's transaction commits. Hashed
 * so that any schema name fits the 63 bytes of a channel name.
 */
export function intentChannel(schema: string): string {
  return `bqi_intents_${sha256(schema, 'hex').slice(0, 16)}`;
}

const table = (schema: string) => `${schema}.idempotency_intents`;

/**
 * Records intents in one statement (`unnest`, one row per key; a key already recorded is left as
 * it is). `addNow`: the producer adds the jobs itself right after, so they are marked relayed and
 * the relay looks at them only after `graceMs` (it would otherwise race the producer's own add).
 * Otherwise (recorded in the caller's transaction) they are due at once and the schema's channel
 * is notified, delivered on commit. Returns the keys this statement inserted.
 */
export async function recordIntents(
  exec: IntentExecutor,
  schema: string,
  rows: readonly IntentRow[],
  mode: { addNow: true; graceMs: number } | { addNow: false },
): Promise<Set<string>> {
  const [r] = await exec<{ keys: string[] }>(
    `with ins as (
       insert into ${table(schema)} (key, operation, queue, job_id, job_name, data, opts, task_id,
                                     accepted_at, relayed_at, relay_after)
       select u.k, u.o, u.q, u.j, u.n, u.d::jsonb, u.p::jsonb, u.t, now(),
              case when $9::bigint is null then null else now() end,
              now() + coalesce($9::bigint, 0) * interval '1 millisecond'
       from unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[])
         as u(k, o, q, j, n, d, p, t)
       on conflict (key) do nothing
       returning key
     )
     select array(select key from ins) as keys,
            case when $10::text is null then null else pg_notify($10, '') end as notified`,
    [
      rows.map((x) => x.key),
      rows.map((x) => x.operation),
      rows.map((x) => x.queue),
      rows.map((x) => x.jobId),
      rows.map((x) => x.jobName),
      rows.map((x) => JSON.stringify(x.data)),
      rows.map((x) => JSON.stringify(x.opts)),
      rows.map((x) => x.taskId ?? null),
      mode.addNow ? mode.graceMs : null,
      mode.addNow ? null : intentChannel(schema),
    ],
  );
  return new Set(r?.keys ?? []);
}

/**
 * The next due intents, oldest `relay_after` first, locked for the relay's transaction: another
 * relay skips them (`SKIP LOCKED`) and takes the next ones, so relays cooperate without waiting.
 */
export async function lockDueIntents(exec: IntentExecutor, schema: string, limit: number): Promise<DueIntent[]> {
  const rows = await exec<{
    key: string;
    operation: string;
    queue: string;
    job_id: string;
    job_name: string;
    data: unknown;
    opts: Record<string, unknown>;
    task_id: string | null;
    relayed_at: Date | null;
    readds: number;
    accepted_at: Date;
  }>(
    `select key, operation, queue, job_id, job_name, data, opts, task_id, relayed_at, readds, accepted_at
     from ${table(schema)} where relay_after <= now() order by relay_after limit $1 for update skip locked`,
    [limit],
  );
  return rows.map((r) => ({
    key: r.key,
    operation: r.operation,
    queue: r.queue,
    jobId: r.job_id,
    jobName: r.job_name,
    data: r.data,
    opts: r.opts,
    taskId: r.task_id ?? undefined,
    relayedAt: r.relayed_at,
    readds: r.readds,
    acceptedAt: r.accepted_at,
  }));
}

/**
 * Deletes the intents among `keys` whose key has a ledger row: they were claimed, and from then
 * on the ledger holds the truth. Returns the keys deleted.
 */
export async function deleteClaimedIntents(exec: IntentExecutor, schema: string, keys: string[]): Promise<string[]> {
  if (keys.length === 0) return [];
  const rows = await exec<{ key: string }>(
    `delete from ${table(schema)} i using ${schema}.idempotency_ledger l
     where i.key = any($1::text[]) and l.key = i.key returning i.key`,
    [keys],
  );
  return rows.map((r) => r.key);
}

/**
 * Marks intents looked at: due again after `recheckAfterMs`, relayed from now on when they were
 * not, and `readds` counted up for those whose vanished job was added again.
 */
export async function markIntentsChecked(
  exec: IntentExecutor,
  schema: string,
  keys: string[],
  readded: string[],
  recheckAfterMs: number,
): Promise<void> {
  if (keys.length === 0) return;
  await exec(
    `update ${table(schema)} set relay_after = now() + $2::bigint * interval '1 millisecond',
       relayed_at = coalesce(relayed_at, now()), readds = readds + (key = any($3::text[]))::int
     where key = any($1::text[])`,
    [keys, recheckAfterMs, readded],
  );
}

/** Intents recorded and not yet claimed, and the oldest one's acceptance (for stats and metrics). */
export async function pendingIntents(
  exec: IntentExecutor,
  schema: string,
): Promise<{ count: number; oldestAcceptedAt: Date | null }> {
  const [r] = await exec<{ n: number; oldest: Date | null }>(
    `select count(*)::int as n, min(accepted_at) as oldest from ${table(schema)}`,
    [],
  );
  return { count: r?.n ?? 0, oldestAcceptedAt: r?.oldest ?? null };
}
