/**
 * The floors' statements: one multi-row statement per batch, coalesced by the library's own
 * micro-batcher with the ledger's defaults (at most 200 keys; one batch in flight, up to 4 when one
 * stalls), its requests in
 * key order, each a named (prepared) statement committed synchronously on `pool`. The write floor
 * (bench/wrapper.ts, bench/lib/postgres-backend-pair.ts) is two of them per job: the key inserted
 * before the effect, a flag set after it; no fingerprint, lease, epoch, replay or result.
 * The guarded floors add only what the ledger's guarantees need: a fingerprint stored with the key
 * and an epoch fencing the completion (fresh), the stored fingerprint read with the result and
 * compared (replay).
 */
import { createHash } from 'node:crypto';
import type { Job } from 'bullmq';
import type pg from 'pg';
import { boundedKey } from '../../src/keys/idempotency-key.js';
import { MicroBatcher } from '../../src/ledger/micro-batcher.js';
import { fpBytes } from '../../src/ledger/sql/fragments.js';
import { ENVELOPE_FIELD, type JobEnvelope } from '../../src/operation/envelope.js';
import type { Operation } from '../../src/operation/operation.js';
import type { Keyring } from '../../src/sealing/keyring.js';
import { checkResult } from '../../src/sealing/sealed-result.js';

/** The ledger's batching defaults (PostgresLedger: `batching.maxBatch`, `batching.maxInFlight`). */
const MAX_BATCH = 200;
const MAX_IN_FLIGHT = 4;

/** One statement per batch: `values` gives its parameters, `answer` each returned row's answer (by the row's key). */
export function batchedStatement<Req extends { key: string }, A>(
  pool: pg.Pool,
  name: string,
  text: string,
  values: (sorted: Req[]) => unknown[],
  answer: (row: Record<string, unknown>) => A,
): MicroBatcher<Req, A> {
  return new MicroBatcher<Req, A>(
    async (reqs) => {
      const sorted = [...reqs].sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
      const res = await pool.query({ name, text, values: values(sorted) });
      return new Map(res.rows.map((row: Record<string, unknown>) => [row.key as string, answer(row)]));
    },
    MAX_BATCH,
    MAX_IN_FLIGHT,
  );
}

/** A statement over a batch of keys (`$1::text[]`) whose returned keys answer `true`. */
export const keyBatch = (pool: pg.Pool, name: string, text: string): MicroBatcher<{ key: string }, true> =>
  batchedStatement<{ key: string }, true>(
    pool,
    name,
    text,
    (sorted) => [sorted.map((r) => r.key)],
    () => true,
  );

/** A floor's claim: the batch's keys inserted into `table`; a key already there answers nothing. */
const floorClaim = (pool: pg.Pool, name: string, table: string) =>
  keyBatch(
    pool,
    name,
    `insert into ${table} (key) select k from unnest($1::text[]) k order by k on conflict do nothing returning key`,
  );

/** The write floor on `table` (`key text primary key, done boolean not null default false`). */
export function writeFloor(pool: pg.Pool, table: string, prefix = 'bench_floor') {
  return {
    claim: floorClaim(pool, `${prefix}_claim`, table),
    done: keyBatch(
      pool,
      `${prefix}_done`,
      `update ${table} t set done = true from unnest($1::text[]) k where t.key = k returning t.key`,
    ),
  };
}

/** The fresh floor on `table` (`key text primary key, result jsonb`): the key inserted, then its (sealed) result stored. */
export function freshFloor(pool: pg.Pool, table: string, prefix = 'bench_fresh_floor') {
  return {
    claim: floorClaim(pool, `${prefix}_claim`, table),
    done: batchedStatement<{ key: string; result: string }, true>(
      pool,
      `${prefix}_done`,
      `update ${table} t set result = u.r::jsonb from unnest($1::text[], $2::text[]) u(k, r)
      where t.key = u.k returning t.key`,
      (sorted) => [sorted.map((r) => r.key), sorted.map((r) => r.result)],
      () => true,
    ),
  };
}

/** How a guarded floor stores its keys: the key text as it is (the default), or another encoding of it. */
type KeyColumn = {
  /** SQL of the stored key from the request's key text `k`. */
  stored: (k: string) => string;
  /** SQL of the key text the statements answer, from the stored column `c`. */
  told: (c: string) => string;
};
const KEY_AS_TEXT: KeyColumn = { stored: (k) => k, told: (c) => c };

/**
 * The guarded fresh floor on `table` (`key text primary key, fingerprint bytea not null, epoch int
 * not null, result jsonb`): the fresh floor with the fingerprint stored with the key (as the ledger
 * stores it: `fpBytes`) and an epoch fence. The claim answers the row's epoch (1: the row is new);
 * the completion stores the (sealed) result only where the key still holds that epoch. `key` is how
 * the key column holds the requests' keys (see {@link narrowGuardedFreshFloor}).
 */
export function guardedFreshFloor(
  pool: pg.Pool,
  table: string,
  prefix = 'bench_guarded_fresh_floor',
  key: KeyColumn = KEY_AS_TEXT,
) {
  return {
    claim: batchedStatement<{ key: string; fingerprint: string }, number>(
      pool,
      `${prefix}_claim`,
      `insert into ${table} (key, fingerprint, epoch) select ${key.stored('u.k')}, ${fpBytes('u.f')}, 1
      from unnest($1::text[], $2::text[]) u(k, f) order by u.k on conflict do nothing returning ${key.told('key')} as key, epoch`,
      (sorted) => [sorted.map((r) => r.key), sorted.map((r) => r.fingerprint)],
      (row) => row.epoch as number,
    ),
    done: batchedStatement<{ key: string; epoch: number; result: string }, true>(
      pool,
      `${prefix}_done`,
      `update ${table} t set result = u.r::jsonb from unnest($1::text[], $2::int4[], $3::text[]) u(k, e, r)
      where t.key = ${key.stored('u.k')} and t.epoch = u.e returning ${key.told('t.key')} as key`,
      (sorted) => [sorted.map((r) => r.key), sorted.map((r) => r.epoch), sorted.map((r) => r.result)],
      () => true,
    ),
  };
}

/**
 * A fingerprint as the ledger's rows hold it (`fpBytes`, migration 0009): a SHA-256 hex digest as
 * its 32 bytes, any other text (a keyed fingerprint) as its UTF-8 bytes, a NUL byte after exactly 32.
 */
export function storedFingerprint(fp: string): Buffer {
  if (fp.length === 64 && !/[^0-9a-f]/.test(fp)) return Buffer.from(fp, 'hex');
  const bytes = Buffer.from(fp, 'utf8');
  return bytes.length === 32 ? Buffer.concat([bytes, Buffer.of(0)]) : bytes;
}

/**
 * The guarded fresh floor with a narrow key: on `table` (`key bytea primary key, fingerprint bytea
 * not null, epoch int not null, result jsonb`), the key stored as a 16-byte digest. Requests name
 * the key by the digest's hex text (`narrowKey`), as the answers do.
 */
export const narrowGuardedFreshFloor = (pool: pg.Pool, table: string, prefix = 'bench_narrow_guarded_fresh_floor') =>
  guardedFreshFloor(pool, table, prefix, { stored: (k) => `decode(${k}, 'hex')`, told: (c) => `encode(${c}, 'hex')` });

/** A key as the narrow floor names it: the hex text of its 16-byte MD5 digest. */
export const narrowKey = (key: string): string => createHash('md5').update(key).digest('hex');

/**
 * The guarded replay floor's processor: the replay floor (the stored result of the key the job
 * carries, read by one statement a batch from `ledgerTable`) plus what a correct replay must do
 * and nothing else: the input's fingerprint made as the library makes it and compared with the
 * stored one read with the result (a mismatch fails the job), and the seal authenticated for the
 * operation and key (`checkResult`, as the wrapper's replay does). It returns the stored row's
 * result, as the wrapper does. Three parameters, as the wrapper declares: BullMQ makes the job's
 * AbortSignal for it.
 */
export function guardedReplay(pool: pg.Pool, ledgerTable: string, operation: Operation, keyring: Keyring) {
  const stored = batchedStatement<{ key: string }, { fingerprint: Buffer; result: unknown }>(
    pool,
    'bench_guarded_replay_floor',
    `select key, fingerprint, result from ${ledgerTable} where key = any($1::text[])`,
    (sorted) => [sorted.map((r) => r.key)],
    (row) => ({ fingerprint: row.fingerprint as Buffer, result: row.result }),
  );
  return async (job: Job, _token?: string, _signal?: AbortSignal): Promise<unknown> => {
    const data = job.data as JobEnvelope;
    const key = boundedKey(data[ENVELOPE_FIELD].key);
    const fingerprint = storedFingerprint(operation.fingerprintOf(data.input, keyring));
    const row = await stored.submit({ key });
    if (row === undefined) throw new Error(`guarded replay floor: ${key} has no row`);
    if (!fingerprint.equals(row.fingerprint))
      throw new Error(`guarded replay floor: ${key} was recorded for another input`);
    checkResult(row.result, keyring, { operation: operation.name, key });
    return row.result;
  };
}
