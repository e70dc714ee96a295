import type pg from 'pg';
import { checkSchema, DEFAULT_SCHEMA } from '../db/connection.js';
import { retryingDeadlock } from '../db/deadlock-retry.js';
import { type PoolLogger, watchPoolErrors } from '../db/pool-errors.js';
import { DEFAULT_PREPARED_STATEMENTS, runStatement } from '../db/prepared-statements.js';
import { statementName } from '../db/statement-name.js';
import { StatisticsRefresh } from '../db/statistics-refresh.js';
import { storable } from '../db/storable.js';
import { IdempotencyConfigError } from '../errors/errors.js';
import { DEFAULT_REDACTION_POLICY, type RedactionPolicy } from '../redaction/define-policy.js';
import { engineOf } from '../redaction/policy-engine.js';
import { type AuditEvent, auditEventSchema } from './audit-event.js';
import type { AuditBatchData, BatchJson } from './batch-codec.js';
import { batchTagHolds } from './batch-tag.js';
import { CHAIN_HEAD_MISSING } from './chain-sql.js';
import { isAuditEvent } from './check-event.js';
import { deadLetterEvent } from './dead-letter-event.js';
import { type DeadLetterReason, formatReason, invalidEventReason, refusedEventReason } from './dead-letter-reason.js';
import { eventDigestV4, eventMicros } from './event-digest.js';
import { isIdentifier } from './identifier-grammar.js';
import { auditInsertSql, COLUMNS, chainHeadsSql } from './insert-statement.js';
import { lookupSql } from './lookup-sql.js';
import { createAuditPartitions } from './partitions.js';
import { RECEIPT_MISSING, receiptSql } from './receipts-sql.js';
import { storeRedactor } from './redact-event.js';

export type WriteBatchResult = { inserted: number; duplicates: number; deadLettered: number };

/** How an {@link AuditStore} talks to its pool. */
export type AuditStoreOptions = {
  /**
   * Run the batch insert as a named prepared statement. `false` behind a pooler in transaction
   * mode (pgbouncer < 1.21, RDS Proxy, Supavisor); see the ledger's option of the same name.
   * @defaultValue `true`
   */
  preparedStatements?: boolean;
  /**
   * Hash chains per day the events are appended to (see `chain-sql.ts`): each insert in flight
   * takes a chain of its own, so that concurrent inserts of a writer do not queue on one head.
   * Writers of other processes use the same slots; an insert on a chain another holds waits for
   * its head's row lock. Give at least the writer's concurrency.
   * @defaultValue 4
   */
  chainSlots?: number;
  /** Receives one warning per dropped idle connection, when the store watches the pool (it has no `'error'` listener). */
  logger?: PoolLogger;
};

/**
 * Postgres side of the audit trail. A batch is written with one multi-row statement
 * (`jsonb_to_recordset`, one parameter however many events) that stores only the events whose
 * ids it has not stored (`audit_event_ids`), so a redelivered batch, a re-emit or a backfill
 * never writes an event twice. An invalid event goes to the dead-letter table with its reason
 * and never blocks the batch.
 */
export class AuditStore {
  private readonly table: string;
  private readonly deadLetter: string;
  /** The insert that takes every id of a batch to be new: what runs first (see `auditInsertSql`). */
  private readonly freshSql: string;
  /** The insert that looks each id up: the fallback when the fresh one meets an id stored before. */
  private readonly insertSql: string;
  /** The insert with `on conflict do nothing`: the fallback when the plain one meets a stored row (see `auditInsertSql`). */
  private readonly absorbingSql: string;
  private readonly schema: string;
  /** The insert's prepared-statement name; undefined when it runs unnamed. */
  private readonly insertName: string | undefined;
  private readonly freshName: string | undefined;
  private readonly absorbingName: string | undefined;
  /**
   * The timeline's reads (`events`), by task and by operation. Named, so that a connection plans
   * each once and keeps its generic plan after the custom ones Postgres tries first (see
   * lookup-sql.ts: planning it is what a read costs with many partitions).
   */
  private readonly byTaskName: string | undefined;
  private readonly byOperationName: string | undefined;
  private readonly structure: (e: AuditEvent) => AuditEvent;
  /** Analyzes a young `audit_event_ids` as it grows, so that the insert's cached plan uses its index. */
  private readonly statistics: StatisticsRefresh | undefined;
  /** Batches whose plain insert met a stored row and ran again absorbing it (see `absorbingSql`). */
  absorbed = 0;
  /** Batches whose fresh insert met an id stored before and ran again looking their ids up (see `freshSql`). */
  lookedUp = 0;
  /**
   * Set when a fresh insert met an id stored before: the batches that follow look their ids up
   * first, until one of them turns out to hold only new events. A backfill or a redelivery sends
   * run after run of stored events, and each fresh insert that fails costs a statement and a line
   * of Postgres's error log.
   */
  private lookUpFirst = false;
  /** Batches run again after Postgres failed their statement to break a deadlock with a writer storing the same ids (see `run`). */
  deadlocks = 0;
  /**
   * The fresh insert runs first on a pool, where a statement that fails is rolled back alone. Given a
   * single client instead (perhaps in a transaction of the caller's, which a failed statement would
   * abort), the store looks each batch's ids up first, as the fallback does.
   */
  private readonly freshFirst: boolean;
  /** Creates the chain heads of a batch's days. */
  private readonly headsSql: string;
  private readonly chainSlots: number;
  /** Chain slots no insert of this store is using; when none is free, inserts share one (its head's row lock orders them). */
  private readonly freeSlots: number[];
  private nextShared = 0;

  /**
   * @param policy holds every event's clear-text fields to their grammars, redacts its details as
   * the emitters do (see `storeRedactor`) and scrubs what goes to the dead-letter table; its keys make the references, so pass the emitters' policy (the same
   * keyring) to keep them matchable. @defaultValue DEFAULT_REDACTION_POLICY
   * @param options prepared statements and pool errors; a pool without an `'error'` listener gets
   * the library's (a dropped idle connection must not end the process).
   */
  constructor(
    private readonly pool: pg.Pool,
    schema: string = DEFAULT_SCHEMA,
    private readonly policy: RedactionPolicy = DEFAULT_REDACTION_POLICY,
    options: AuditStoreOptions = {},
  ) {
    watchPoolErrors(pool, options.logger);
    this.chainSlots = options.chainSlots ?? DEFAULT_CHAIN_SLOTS;
    if (!Number.isSafeInteger(this.chainSlots) || this.chainSlots < 1 || this.chainSlots > MAX_CHAIN_SLOTS) {
      throw new IdempotencyConfigError(`chainSlots must be an integer from 1 to ${MAX_CHAIN_SLOTS}`, {
        option: 'chainSlots',
      });
    }
    this.freeSlots = Array.from({ length: this.chainSlots }, (_, i) => this.chainSlots - 1 - i);
    this.structure = storeRedactor(policy);
    const s = checkSchema(schema);
    const prepared = options.preparedStatements ?? DEFAULT_PREPARED_STATEMENTS;
    this.freshFirst = typeof (pool as { totalCount?: unknown }).totalCount === 'number';
    this.freshName = prepared ? statementName('audit_insert_fresh', s) : undefined;
    this.insertName = prepared ? statementName('audit_insert', s) : undefined;
    this.absorbingName = prepared ? statementName('audit_insert_absorbing', s) : undefined;
    this.byTaskName = prepared ? statementName('audit_events_by_task', s) : undefined;
    this.byOperationName = prepared ? statementName('audit_events_by_operation', s) : undefined;
    this.statistics = prepared ? new StatisticsRefresh(pool, `${s}.audit_event_ids`) : undefined;
    this.table = `${s}.audit_events`;
    this.deadLetter = `${s}.audit_dead_letter`;
    this.freshSql = auditInsertSql(s, 'fresh');
    this.insertSql = auditInsertSql(s, 'plain');
    this.absorbingSql = auditInsertSql(s, 'absorbing');
    this.headsSql = chainHeadsSql(s);
    this.schema = s;
  }

  /**
   * Validates and writes a batch; invalid events are dead-lettered.
   * @param json the batch's JSON text, or jsonb's binary form of it ({@link BatchJson}), when
   * `raw` was parsed from it (the writer's case): if every event passes as it is, it goes to
   * Postgres without being serialised again.
   * @param redacted the batch's events were redacted by an emitter under this store's policy: its
   * tag holds ({@link trustsBatch}); each event is still checked, but not redacted again.
   */
  async writeBatch(raw: unknown[], json?: BatchJson, redacted = false): Promise<WriteBatchResult> {
    const valid: AuditEvent[] = [];
    const invalid: DeadLetter[] = [];
    let asIs = json !== undefined;
    for (const e of raw) {
      if (isAuditEvent(e)) {
        // Every event is held to the emitters' policy here, whoever produced it (an emitter, the
        // backfill, the CLI): fields to their grammars, details redacted; usually a no-op, and
        // skipped for a batch an emitter of this policy tagged.
        const structured = redacted ? e : this.structure(e);
        if (structured !== e) asIs = false;
        valid.push(structured);
        continue;
      }
      asIs = false; // zod's output may differ from its input (a dropped __proto__ key)
      // Normalised before it is judged: a field past its bound or of the wrong type (a job id of
      // 300 characters, `attemptsMade: 1.5`, a code too long) is made to fit, with a receipt,
      // rather than refused. Only what cannot be made to fit is dead-lettered.
      const fitted = isRecord(e) ? this.structure(e as AuditEvent) : e;
      if (isAuditEvent(fitted)) {
        valid.push(fitted);
        continue;
      }
      const parsed = auditEventSchema.safeParse(fitted);
      if (parsed.success) valid.push(this.structure(parsed.data));
      else invalid.push({ event: e, reason: invalidEventReason(parsed.error) });
    }
    let inserted = 0;
    if (valid.length > 0) {
      try {
        inserted = await this.insert(asIs ? (json as BatchJson) : JSON.stringify(valid), this.digests(valid));
      } catch (err) {
        if (!isDataError(err)) throw err; // Postgres unreachable and the like: BullMQ retries the batch
        // An event Postgres cannot store (a NUL character, a lone surrogate in a JSON string...)
        // must not sink the batch: halve it until the refused events stand alone.
        inserted = await this.insertSplitting(valid, invalid);
      }
    }
    if (invalid.length > 0) {
      await this.pool.query(
        `insert into ${this.deadLetter} (event, reason) select x.event, x.reason from jsonb_to_recordset($1::jsonb) as x(event jsonb, reason text)`,
        [
          JSON.stringify(
            // An event that failed validation may not have been through the emitter's redaction;
            // and what Postgres refused once must be made storable before it is stored. The
            // reason is codes and schema paths only (see DeadLetterReason).
            invalid.map((i) => ({
              event: storable(deadLetterEvent(safeJson(i.event), this.policy)),
              reason: formatReason(i.reason),
            })),
          ),
        ],
      );
    }
    return { inserted, duplicates: valid.length - inserted - refused(invalid), deadLettered: invalid.length };
  }

  /**
   * True when an audit job's data carries a tag that holds under this store's policy (batch-tag.ts)
   * for `events` decoded events: an emitter with this policy and its key redacted them.
   */
  trustsBatch(data: unknown, events: number): boolean {
    const d = data as Partial<AuditBatchData> | null | undefined;
    if (typeof d !== 'object' || d === null || typeof d.payload !== 'string' || d.count !== events) return false;
    return batchTagHolds(this.policy, d.tag, events, d.payload);
  }

  /**
   * What the writer computes of a batch's chain (event-digest.ts): each event's time as whole
   * microseconds (the time stored) and its version-4 digest, 32 bytes each, in the batch's order.
   */
  private digests(events: readonly AuditEvent[]): BatchDigests {
    const out = Buffer.allocUnsafe(32 * events.length);
    const micros: string[] = new Array(events.length);
    for (let i = 0; i < events.length; i++) {
      const e = events[i] as AuditEvent;
      // A valid event's time always reads (check-event.ts): an unreadable one is a data error.
      const m = eventMicros(e.createdAt);
      if (m === undefined) throw unreadableTime();
      micros[i] = m;
      eventDigestV4(e, m).copy(out, 32 * i);
    }
    return { digests: out, micros };
  }

  private async insert(json: BatchJson, chain: BatchDigests): Promise<number> {
    const inserted = await this.insertOnce(json, chain);
    this.statistics?.add(inserted);
    return inserted;
  }

  private async insertOnce(json: BatchJson, chain: BatchDigests): Promise<number> {
    try {
      return await this.run(json, chain);
    } catch (err) {
      if (!isMissingPartition(err)) throw err;
      // An event's time has no partition yet (ahead of those the operations process made, or
      // older than all of them): made now, then the batch again.
      const { oldest, newest } = await this.timeRange(json, chain);
      await createAuditPartitions(this.pool, this.schema, oldest, new Date(newest.getTime() + 1));
      return await this.run(json, chain);
    }
  }

  /** The oldest and newest time of a batch: from the writer's times, or the batch's text when it has none. */
  private async timeRange(json: BatchJson, chain: BatchDigests): Promise<{ oldest: Date; newest: Date }> {
    if (chain.micros.length > 0) {
      // Milliseconds, rounded down: a partition holds whole days.
      const ms = chain.micros.map((m) => {
        const us = BigInt(m);
        return Number(us / 1000n - (us % 1000n < 0n ? 1n : 0n));
      });
      return { oldest: new Date(Math.min(...ms)), newest: new Date(Math.max(...ms)) };
    }
    const r = (
      await this.pool.query(
        `select min(x."createdAt") as oldest, max(x."createdAt") as newest
         from jsonb_to_recordset($1::jsonb) as x("createdAt" timestamptz)`,
        [json],
      )
    ).rows[0];
    return { oldest: new Date(r.oldest), newest: new Date(r.newest) };
  }

  /**
   * `runOnce`, again when Postgres broke a deadlock by failing it. Writers storing the same ids at
   * once (a batch delivered twice, lost events stored again) can wait on each other's chain head
   * and ids in a cycle; the statement that Postgres fails wrote nothing, and runs again. On a
   * single client (perhaps in the caller's transaction, which the failure aborted) it is thrown.
   */
  private async run(json: BatchJson, chain: BatchDigests): Promise<number> {
    if (!this.freshFirst) return this.runOnce(json, chain);
    return retryingDeadlock(
      () => this.runOnce(json, chain),
      DEADLOCK_RUNS,
      () => this.deadlocks++,
    );
  }

  /**
   * The fresh insert; on an id stored before (nothing of the batch written), the plain one; on a
   * stored row's conflict there, the absorbing one. After a fresh insert met a stored id, the
   * plain one first (see `lookUpFirst`). Each runs on a chain slot of its own while it runs (see
   * `chainSlots`).
   */
  private async runOnce(json: BatchJson, chain: BatchDigests): Promise<number> {
    const slot = this.freeSlots.pop() ?? this.nextShared++ % this.chainSlots;
    try {
      if (this.freshFirst && !this.lookUpFirst) {
        try {
          return await this.chained(this.freshName, this.freshSql, json, slot, chain);
        } catch (err) {
          if (!isUniqueViolation(err)) throw err;
          this.lookedUp++;
          this.lookUpFirst = true;
        }
      }
      try {
        const inserted = await this.chained(this.insertName, this.insertSql, json, slot, chain);
        // Every event new: the next batch is tried fresh again.
        if (inserted === chain.micros.length) this.lookUpFirst = false;
        return inserted;
      } catch (err) {
        if (!isUniqueViolation(err)) throw err;
        this.absorbed++;
        return await this.chained(this.absorbingName, this.absorbingSql, json, slot, chain);
      }
    } finally {
      if (slot < this.chainSlots && !this.freeSlots.includes(slot)) this.freeSlots.push(slot);
    }
  }

  /**
   * One insert on chain `slot`. When a day of the batch has no chain heads yet, they are made and
   * it runs again; when a receipt of the batch was stored by a concurrent writer after the
   * statement's snapshot (`audit_receipt_missing()`, receipts-sql.ts), it runs again and sees it.
   */
  private async chained(
    name: string | undefined,
    text: string,
    json: BatchJson,
    slot: number,
    chain: BatchDigests,
  ): Promise<number> {
    const micros = `{${chain.micros.join(',')}}`;
    const params = [json, slot, chain.digests, micros];
    for (let attempt = 0; ; attempt++) {
      try {
        return insertedOf(await runStatement<{ inserted: number }>(this.pool, name, text, params));
      } catch (err) {
        if (attempt >= 2) throw err;
        if (isChainHeadMissing(err)) await this.pool.query(this.headsSql, [micros, this.chainSlots]);
        else if (!isReceiptMissing(err)) throw err;
      }
    }
  }

  /** Inserts what Postgres accepts, halving on each refusal; a single refused event is dead-lettered. */
  private async insertSplitting(events: AuditEvent[], invalid: DeadLetter[]): Promise<number> {
    try {
      return await this.insert(JSON.stringify(events), this.digests(events));
    } catch (err) {
      if (!isDataError(err)) throw err;
      if (events.length === 1) {
        // Postgres quotes the offending value in some messages (`invalid input syntax…: "…"`):
        // only its SQLSTATE is kept.
        invalid.push({ event: events[0], reason: refusedEventReason(err), refused: true });
        return 0;
      }
      const half = Math.ceil(events.length / 2);
      return (
        (await this.insertSplitting(events.slice(0, half), invalid)) +
        (await this.insertSplitting(events.slice(half), invalid))
      );
    }
  }

  /**
   * Dead-letters a whole audit job that cannot be read as events (not inflatable, not JSON). Its
   * bytes are unreadable to the redaction policy, so only their shape is kept: the batch fields
   * it has (others are counted, not named), a known encoding, sizes; a job id that is not an
   * identifier is referenced.
   */
  async deadLetterBatch(jobId: string | undefined, data: unknown, reason: DeadLetterReason): Promise<void> {
    const d = (typeof data === 'object' && data !== null ? data : {}) as Record<string, unknown>;
    const keys = Object.keys(d);
    const fields = keys.filter((k) => BATCH_FIELDS.has(k));
    const shape = {
      undecodableBatch: true,
      jobId:
        jobId === undefined
          ? null
          : isIdentifier(jobId, 255)
            ? jobId
            : engineOf(this.policy).keyring.identifierRef(jobId),
      fields,
      otherFields: keys.length - fields.length,
      encoding: typeof d.encoding === 'string' ? (ENCODINGS.has(d.encoding) ? d.encoding : 'other') : null,
      count: Number.isSafeInteger(d.count) ? d.count : null,
      payloadChars: typeof d.payload === 'string' ? d.payload.length : null,
    };
    await this.pool.query(`insert into ${this.deadLetter} (event, reason) values ($1::jsonb, $2)`, [
      JSON.stringify(shape),
      formatReason(reason),
    ]);
  }

  /**
   * The forms an identifier may be stored in under this store's policy: in clear, and its keyed
   * refs under every key of the policy's keyring.
   */
  storedForms(value: string): string[] {
    return [value, ...engineOf(this.policy).keyring.identifierRefs(value)];
  }

  /**
   * Events of a task, or of an operation key (with its steps), in causal order. A task id or key
   * that does not match its grammar was stored as its keyed ref: it is looked up by its refs
   * under every key of this store's policy too (so give the store the emitters' policy).
   */
  async events(query: { taskId: string } | { operationKey: string }): Promise<AuditEvent[]> {
    const select = COLUMNS.map(
      ([c, f]) => `${c === 'redaction' ? receiptSql(this.schema, 'e') : `e.${c}`} as "${f}"`,
    ).join(', ');
    const order = 'order by created_at, coalesce(epoch, 0), seq, event_id';
    const byTask = 'taskId' in query;
    const value = byTask ? query.taskId : query.operationKey;
    // Both the value and its refs: a value kept in clear now (a ULID, a declared format) may have
    // been stored as its ref by an earlier version or under another policy.
    const values = this.storedForms(value);
    const res = await runStatement(
      this.pool,
      byTask ? this.byTaskName : this.byOperationName,
      `select ${select} from ${this.table} e where ${lookupSql('e', byTask ? 'task_id' : 'operation_id', '$1::text[]')} ${order}`,
      [values],
    );
    return res.rows.map((r) => {
      const e: Record<string, unknown> = {};
      for (const [, f] of COLUMNS) if (r[f] !== null && r[f] !== undefined) e[f] = r[f];
      e.createdAt = (r.createdAt as Date).toISOString();
      return e as AuditEvent;
    });
  }

  /**
   * Waits for the statistics check a write may have started in the background (an `ANALYZE` of
   * `audit_event_ids` as it grows), so that the pool can be ended after it. The store takes
   * nothing else to close and stays usable.
   */
  async close(): Promise<void> {
    await this.statistics?.settled();
  }
}

/** An event for the dead-letter table; `refused`: it was valid, but Postgres would not store it. */
type DeadLetter = { event: unknown; reason: DeadLetterReason; refused?: boolean };

/** Fields of an audit job's data that may be named in a dead letter. */
const BATCH_FIELDS = new Set(['encoding', 'count', 'payload', 'events']);
const ENCODINGS = new Set(['deflate-raw']);

const refused = (invalid: DeadLetter[]) => invalid.filter((i) => i.refused).length;

/** Postgres found no partition of audit_events for a row's time (23514, as a check violation). */
function isMissingPartition(err: unknown): boolean {
  const e = err as { code?: unknown; message?: unknown };
  return e.code === '23514' && typeof e.message === 'string' && e.message.startsWith('no partition of relation');
}

/** Chain slots of a store, unless given. */
export const DEFAULT_CHAIN_SLOTS = 4;
const MAX_CHAIN_SLOTS = 256;

/** The store's statement met a day without chain heads (`audit_chain_missing()`). */
function isChainHeadMissing(err: unknown): boolean {
  const e = err as { code?: unknown; message?: unknown };
  return e.code === 'P0001' && e.message === CHAIN_HEAD_MISSING;
}

/** The store's statement met a receipt stored after its snapshot (`audit_receipt_missing()`). */
export function isReceiptMissing(err: unknown): boolean {
  const e = err as { code?: unknown; message?: unknown };
  return e.code === 'P0001' && e.message === RECEIPT_MISSING;
}

/** SQLSTATE of a unique violation. */
const UNIQUE_VIOLATION = '23505';

const isUniqueViolation = (err: unknown) => (err as { code?: unknown }).code === UNIQUE_VIOLATION;

/** Runs of a batch's insert, the first included, before a deadlock is thrown. */
const DEADLOCK_RUNS = 5;

/** The events a chained insert stored: its one row's count (see `auditInsertSql`). */
const insertedOf = (r: pg.QueryResult<{ inserted: number }>) => r.rows[0]?.inserted ?? 0;

/** What the writer computes of a batch for its chain (`AuditStore.digests`). */
type BatchDigests = { digests: Buffer; micros: string[] };

/**
 * An event time the writer cannot read (none the event schema accepts): refused with the SQLSTATE
 * Postgres gives a time it cannot parse, so that the event is dead-lettered and the batch stored.
 */
function unreadableTime(): Error {
  return Object.assign(new Error('unreadable event time'), { code: '22007' });
}

/** Postgres refused the data itself (SQLSTATE class 22, or 23 other than a unique violation). */
function isDataError(err: unknown): boolean {
  const code = (err as { code?: unknown }).code;
  return typeof code === 'string' && (code.startsWith('22') || (code.startsWith('23') && code !== UNIQUE_VIOLATION));
}

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

function safeJson(v: unknown): unknown {
  try {
    JSON.stringify(v);
    return v;
  } catch {
    return { unserialisable: String(v).slice(0, 200) };
  }
}
