import { CompiledQuery, type Kysely } from 'kysely';
import type pg from 'pg';
import { checkSchema, DEFAULT_SCHEMA, kyselyFor, openPool, type PostgresOptions } from '../db/connection.js';
import { poolErrorCount } from '../db/pool-errors.js';
import { DEFAULT_PREPARED_STATEMENTS, runStatement } from '../db/prepared-statements.js';
import { nullable, type Row } from '../db/row.js';
import { statementName } from '../db/statement-name.js';
import { StatisticsRefresh } from '../db/statistics-refresh.js';
import { storableText } from '../db/storable.js';
import {
  IdempotencyConfigError,
  IdempotencyInProgressError,
  IllegalTransitionError,
  InvalidInputError,
  PayloadTooLargeError,
  RecordLostError,
  SealError,
  SerializationError,
  StaleEpochError,
} from '../errors/errors.js';
import { ERROR_CODES } from '../errors/idempotency-error.js';
import { canonicalJson } from '../fingerprint/canonical-json.js';
import { boundedKey, parseIdempotencyKey } from '../keys/idempotency-key.js';
import { MicroBatcher } from './micro-batcher.js';
import { parseTransitions } from './recorded-transition.js';
import { type ClaimParams, type ParamsOf, type StatementName, statementValues } from './statement-params.js';
import { type LedgerStatements, ledgerStatements } from './statements.js';
import {
  type AcquiringTransition,
  type ClaimTransition,
  type OutcomeTransition,
  TRANSITIONS,
  transitionSpec,
} from './transitions.js';
import type {
  ClaimOptions,
  ClaimOutcome,
  KeyLike,
  LedgerRecord,
  LedgerStatus,
  RecordedError,
  ResolveOutcome,
  Transition,
  WriteReceipt,
} from './types.js';

export type LedgerOptions = PostgresOptions & {
  /** Largest recorded result, in bytes of JSON. @defaultValue 1 MiB */
  maxResultBytes?: number;
  /** Pool size when the ledger opens its own pool. @defaultValue 10 */
  poolSize?: number;
  /**
   * Shifts the database clock the ledger reads by this many milliseconds. For tests of
   * retention and lease boundaries without sleeping; leave at 0 in production.
   * @defaultValue 0
   */
  clockOffsetMs?: number;
  /**
   * Coalesce concurrent claims and completions into multi-row statements (see MicroBatcher).
   * Each key's outcome is the same as with single statements.
   * @defaultValue `{ maxBatch: 200, maxInFlight: 4 }`; `false` sends one statement per call
   */
  batching?: false | { maxBatch?: number; maxInFlight?: number };
  /**
   * Run the ledger's statements as named prepared statements, parsed and planned once per
   * connection. Set `false` behind a pooler that shares server connections between clients:
   * pgbouncer before 1.21 in transaction mode (or 1.21+ without `max_prepared_statements`), RDS
   * Proxy, Supavisor in transaction mode. Named statements there fail with SQLSTATE 42P05 or
   * 26000, which the ledger reports as an `IdempotencyConfigError` naming this option.
   * @defaultValue `true`
   * @example
   * new PostgresLedger({ connectionString: 'postgres://app@pgbouncer:6432/app', preparedStatements: false });
   */
  preparedStatements?: boolean;
  /**
   * Seals what the ledger keeps, for a ledger used on its own (outside `createIdempotency` and
   * `withIdempotency`, which seal before they call it and give it no keyring): a result given to
   * `complete` or `resolve` is stored as `{"$sealed": …}` (AES-256-GCM under the keyring's
   * current key, opened by `unseal` too), an error given to `fail` or `markUnknown` keeps its code
   * and name with its message sealed; `claim` replays and `get` return results opened.
   * **Without it, the ledger stores results and error messages exactly as given, in clear.**
   * @example
   * new PostgresLedger({ connectionString, keyring: defineKeyring({ keys: [{ id: 'k1', secret }] }) });
   */
  keyring?: LedgerKeyring;
};

/**
 * What the ledger needs of a keyring to seal on its own (a `Keyring` from `defineKeyring` is one):
 * the ledger sits below the sealing layer and knows no more of it than this.
 */
export type LedgerKeyring = {
  seal(value: unknown, place: LedgerSealPlace): string;
  openPlaced(sealed: string, purpose: 'result' | 'error'): { value: unknown; place: Omit<LedgerSealPlace, 'purpose'> };
};

/**
 * Where the ledger seals a value on its own: bound to the row's key (and a purpose), so a value
 * copied into another key's row does not open there. The ledger knows no operation when it
 * completes a key, so its own seals name none (`''`); a seal naming the row's operation (the
 * wrapper's) opens as well.
 */
export type LedgerSealPlace = { purpose: 'result' | 'error'; operation: string; field?: string; key: string };

/** The field of a sealed result (as `sealResult` makes it) that holds the whole value. */
const SEALED = '$sealed';

type ClaimRow = { key: string; claim: ClaimParams };

/** Who made an operator's transition and why (recorded with it, for its audit event). */
export type OperatorFacts = { actorId?: string; reason?: string };

/**
 * A position of the sweep, which reads the rows in `sweep_after` order (migration 0010): `at` is
 * the last row's `sweep_after` as Postgres text (exact, microseconds), `key` its key.
 */
export type SweepCursor = { at: string; key: string };

/**
 * The ids of the audit events that must be stored before an expired row (and its record of
 * transitions) may go: the audit trail knows them (the sweeper passes `transitionEventIds` with its
 * retention's horizon); the ledger only checks that they are stored.
 */
export type SweepEventIds = (record: LedgerRecord) => readonly string[];

/** One page of {@link PostgresLedger.sweepPage}. */
export type SweepPage = {
  deleted: number;
  /** Candidates read (deleted or pending). */
  scanned: number;
  /** Expired rows kept because an event of theirs is not stored yet. */
  pending: LedgerRecord[];

  /** Where the next page starts; undefined when there were no candidates. */
  next: SweepCursor | undefined;
};
type CompleteRow = { key: string; epoch: number; text: string };

export const DEFAULT_MAX_RESULT_BYTES = 1024 * 1024;
export const MAX_ERROR_MESSAGE_LENGTH = 2000;
const MAX_CLAIM_ROUNDS = 8;

/** A kysely transaction (or instance) in which a completion should commit. */
export type LedgerExecutor = Kysely<unknown>;

/**
 * The Postgres idempotency ledger: the durable truth every attempt must pass before it may
 * touch the outside world. Knows nothing of BullMQ.
 *
 * @example
 * const ledger = new PostgresLedger({ connectionString: process.env.DATABASE_URL });
 * const claim = await ledger.claim({ key, operation: 'assets.create', fingerprint: fp,
 *   leaseMs: 10_000, retentionMs: 86_400_000, downstream: 'idempotent' });
 * if (claim.kind === 'acquired') await ledger.complete(key, claim.epoch, { assetId: 'a1' });
 */
export class PostgresLedger {
  readonly schema: string;
  readonly pool: pg.Pool;
  /**
   * `staleWrites`: writes refused because their epoch was stale; a rising count means leases are
   * too short. `poolErrors`: idle connections of the pool that Postgres (or a proxy) dropped,
   * replaced by the pool; counted when the library watches the pool (see `pool`).
   */
  readonly metrics: {
    staleWrites: number;
    claims: number;
    /**
     * Fenced writes (completions, failures, releases, heartbeats) that found the row of their
     * claim gone, or at a lower epoch: records lost after they were acknowledged (see
     * {@link RecordLostError}). Any count above zero means the database lost acknowledged writes.
     */
    readonly lostRecords: number;
    readonly poolErrors: number;
    /** ANALYZE statements this ledger ran on its young table (see StatisticsRefresh). */
    readonly tablesAnalyzed: number;
  };
  private readonly owned: boolean;
  /** See `metrics.lostRecords`. */
  private lost = 0;
  private readonly sql: LedgerStatements;
  /** Prepared-statement names; undefined when statements run unnamed. */
  private readonly names: Partial<Record<keyof LedgerStatements, string>>;
  private readonly maxResultBytes: number;
  private readonly clockOffsetMs: number;
  private readonly keyring: LedgerKeyring | undefined;
  private kysely: Kysely<unknown> | undefined;
  private readonly claimBatcher: MicroBatcher<ClaimRow, Row> | undefined;
  private readonly completeBatcher: MicroBatcher<CompleteRow, Row> | undefined;
  /** Share of recently claimed keys that already had a row: decides read-first or insert-first. */
  private existingShare = 1;
  /** Analyzes a young table so that named statements' cached plans use its index (named statements only). */
  private readonly statistics: StatisticsRefresh | undefined;

  constructor(options: LedgerOptions) {
    this.schema = checkSchema(options.schema ?? DEFAULT_SCHEMA);
    const { pool, owned } = openPool(options, options.poolSize ?? 10);
    this.pool = pool;
    this.owned = owned;
    const statistics =
      (options.preparedStatements ?? DEFAULT_PREPARED_STATEMENTS)
        ? new StatisticsRefresh(pool, `${this.schema}.idempotency_ledger`)
        : undefined;
    this.statistics = statistics;
    const lost = () => this.lost;
    this.metrics = {
      staleWrites: 0,
      claims: 0,
      get lostRecords() {
        return lost();
      },
      get poolErrors() {
        return poolErrorCount(pool);
      },
      get tablesAnalyzed() {
        return statistics?.analyzed ?? 0;
      },
    };
    this.sql = ledgerStatements(`${this.schema}.idempotency_ledger`);
    // Prepared-statement names are per connection; the schema is part of the name so two
    // ledgers on one pool never collide.
    this.names =
      (options.preparedStatements ?? DEFAULT_PREPARED_STATEMENTS)
        ? Object.fromEntries(Object.keys(this.sql).map((k) => [k, statementName(k, this.schema)]))
        : {};
    this.maxResultBytes = options.maxResultBytes ?? DEFAULT_MAX_RESULT_BYTES;
    this.clockOffsetMs = Math.trunc(options.clockOffsetMs ?? 0);
    this.keyring = options.keyring;
    if (options.batching !== false) {
      const maxBatch = options.batching?.maxBatch ?? 200;
      const maxInFlight = options.batching?.maxInFlight ?? 4;
      this.claimBatcher = new MicroBatcher((rows) => this.claimBatch(rows), maxBatch, maxInFlight);
      this.completeBatcher = new MicroBatcher((rows) => this.completeBatch(rows), maxBatch, maxInFlight);
    }
    if (!(this.maxResultBytes > 0)) {
      throw new IdempotencyConfigError('maxResultBytes must be > 0', { option: 'maxResultBytes' });
    }
  }

  /** A kysely instance on the ledger's pool (for `ctx.tx` and operator queries). */
  get db(): Kysely<unknown> {
    this.kysely ??= kyselyFor(this.pool);
    return this.kysely;
  }

  /**
   * Atomically claims a key. Exactly one of any number of concurrent claimers gets
   * `acquired`; the others learn what the record says (replay, conflict, in progress...).
   */
  async claim(options: ClaimOptions): Promise<ClaimOutcome> {
    const req = claimRowOf(options);
    const k = req.key;
    this.metrics.claims++;
    for (let round = 0; round < MAX_CLAIM_ROUNDS; round++) {
      const row = this.claimBatcher ? await this.claimBatcher.submit(req) : (await this.claimBatch([req])).get(k);
      // No row, or a snapshot that looked claimable while a concurrent claimer won: read again.
      if (!row || (!row.acquired && row.claimable)) continue;
      const outcome = toOutcome(row, options.fingerprint);
      return outcome.kind === 'completed'
        ? { ...outcome, result: this.opened(outcome.result, k, options.operation) }
        : outcome;
    }
    // Every round saw a concurrent writer win between its read and its write: let the caller retry.
    throw new IdempotencyInProgressError({ key: k, retryAfterMs: 0 });
  }

  /**
   * Claims distinct keys; the answer per key is its row. Three steps, each only for the keys that
   * need it: a read answers every key whose row is not claimable (replays, conflicts, live
   * leases: no write, no commit); a plain insert claims the keys that were absent; the full
   * claim statement takes over or reclaims the rest, and any key a concurrent claimer inserted
   * between the read and the insert. When recent keys were mostly new, the read is skipped and
   * the insert goes first. Each key's outcome is that of the full claim alone.
   */
  private async claimBatch(reqs: ClaimRow[]): Promise<Map<string, Row>> {
    const sorted = inKeyOrder(reqs);
    const answers = new Map<string, Row>();
    let absent: readonly ClaimRow[] = sorted;
    const rest: ClaimRow[] = [];
    // Mostly new keys lately: the read would find nothing, so insert first.
    const readFirst = this.existingShare >= 0.2;
    if (readFirst) {
      const peeked = await this.run('peek', {
        keys: sorted.map((r) => r.key),
        fingerprints: sorted.map((r) => r.claim.fingerprint),
        clockOffsetMs: this.clockOffsetMs,
      });
      const found = new Map(peeked.map((row) => [row.key as string, row]));
      const none: ClaimRow[] = [];
      for (const r of sorted) {
        const row = found.get(r.key);
        if (!row) none.push(r);
        else if (row.claimable) rest.push(r);
        else answers.set(r.key, row);
      }
      absent = none;
    }
    if (absent.length > 0) {
      // A concurrent claimer inserted one of the keys first: the full claim arbitrates them all.
      const inserted = await this.runRetryingDeadlock('insertNew', claimsOf(absent, this.clockOffsetMs)).catch(
        (err: unknown) => {
          if ((err as { code?: string }).code === '23505') return [];
          throw err;
        },
      );
      this.statistics?.add(inserted.length);
      if (inserted.length > 0) {
        const byKey = new Map(absent.map((r) => [r.key, r]));
        for (const row of inserted)
          answers.set(row.key as string, newRow(byKey.get(row.key as string) as ClaimRow, row));
      }
      for (const r of absent) if (!answers.has(r.key)) rest.push(r);
    }
    // An exponential average of the share of keys that already had a row.
    const existing = readFirst ? sorted.length - absent.length : rest.length;
    this.existingShare = 0.8 * this.existingShare + 0.2 * (existing / sorted.length);
    if (rest.length > 0) {
      const ordered = inKeyOrder(rest);
      const claimed = await this.runRetryingDeadlock('claim', claimsOf(ordered, this.clockOffsetMs));
      for (const row of claimed) answers.set(row.key as string, row);
    }
    return answers;
  }

  /** Runs the completion statement for distinct keys; a key without a row was fenced. */
  private async completeBatch(reqs: CompleteRow[], executor?: LedgerExecutor): Promise<Map<string, Row>> {
    const sorted = inKeyOrder(reqs);
    const params = { completions: sorted, clockOffsetMs: this.clockOffsetMs };
    const rows = executor
      ? await this.run('complete', params, executor)
      : await this.runRetryingDeadlock('complete', params);
    return new Map(rows.map((row) => [row.key as string, row]));
  }

  /**
   * Batches lock rows in key order, but a claim batch and a completion batch may still meet in
   * opposite orders; Postgres then aborts one statement (40P01) and it is simply run again.
   */
  private async runRetryingDeadlock<N extends 'claim' | 'complete' | 'insertNew'>(
    name: N,
    params: ParamsOf<N>,
  ): Promise<Row[]> {
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.run(name, params);
      } catch (err) {
        if ((err as { code?: string }).code !== '40P01' || attempt >= 5) throw err;
      }
    }
  }

  /** Extends the lease of the attempt holding `epoch`. Throws {@link StaleEpochError} when fenced. */
  async heartbeat(key: KeyLike, epoch: number, leaseMs: number): Promise<WriteReceipt & { leaseExpiresAt: Date }> {
    checkPositiveMs('leaseMs', leaseMs);
    const k = toKey(key);
    const rows = await this.run('heartbeat', { key: k, epoch, leaseMs, clockOffsetMs: this.clockOffsetMs });
    const row = rows[0];
    if (!row) throw await this.fenced(k, epoch, 'heartbeat');
    return { key: k, epoch, at: row.at as Date, leaseExpiresAt: row.lease_expires_at as Date };
  }

  /**
   * Records the result of the attempt holding `epoch`. The result must be JSON and within
   * `maxResultBytes`; otherwise it throws and the row stays unchanged. Pass `executor` (a kysely
   * transaction) to commit the completion together with the side effect's own writes.
   * @returns the stored JSON value (what a replay will return) and the database time.
   */
  async complete(
    key: KeyLike,
    epoch: number,
    result: unknown,
    executor?: LedgerExecutor,
  ): Promise<WriteReceipt & { result: unknown }> {
    const k = toKey(key);
    const text = this.encodeResult(this.sealed(result, k));
    const req = { key: k, epoch, text };
    const row =
      this.completeBatcher && !executor
        ? await this.completeBatcher.submit(req)
        : (await this.completeBatch([req], executor)).get(k);
    if (!row) throw await this.fenced(k, epoch, 'complete', executor);
    return { key: k, epoch, at: new Date(Number(row.at_ms)), result: this.opened(JSON.parse(text), k, '') };
  }

  /**
   * Records a failure. `terminal`: the key replays this failure until it expires.
   * `retryable`: nothing was committed; the key becomes claimable by the next attempt.
   */
  async fail(key: KeyLike, epoch: number, error: RecordedError, mode: 'terminal' | 'retryable'): Promise<WriteReceipt> {
    const terminal = mode === 'terminal';
    return this.finish(key, epoch, error, terminal ? 'failed' : 'failed_retryable', !terminal);
  }

  /**
   * Gives the key back: the attempt committed nothing. The next claim gets epoch + 1. `reasonCode`
   * (why: e.g. `CONFIRMATION_PENDING`) goes into the record of transitions, so the event the
   * backfill derives carries it as the live one does.
   */
  async release(key: KeyLike, epoch: number, reasonCode?: string): Promise<WriteReceipt> {
    return this.finish(key, epoch, null, 'released', null, reasonCode);
  }

  /** The attempt cannot tell whether its side effect committed: no unattended retry until resolved. */
  async markUnknown(key: KeyLike, epoch: number, error: RecordedError): Promise<WriteReceipt> {
    return this.finish(key, epoch, error, 'marked_unknown', null);
  }

  /**
   * Writes back the record of a key whose row was lost while the attempt holding `epoch` ran
   * (a fenced write threw {@link RecordLostError}): `unknown` at that epoch, with `error` (its
   * code `IDEMPOTENCY_RECORD_LOST`), its transition `record_lost` recorded, so a retry or a
   * duplicate job meets `unknown` and does not run. `options` are the attempt's claim (the same
   * key, fingerprint, downstream and facts). Returns null, writing nothing, when the row is back
   * at that epoch or above: another attempt has written it since.
   * @example
   * try { await ledger.complete(key, epoch, value); }
   * catch (err) { if (err instanceof RecordLostError) await ledger.recordLost(claimOptions, epoch, recorded(err)); }
   */
  async recordLost(options: ClaimOptions, epoch: number, error: RecordedError): Promise<WriteReceipt | null> {
    const req = claimRowOf(options);
    const rows = await this.run('recordLost', {
      claims: [req.claim],
      clockOffsetMs: this.clockOffsetMs,
      epoch,
      errorJson: JSON.stringify(boundError(error)),
    });
    const row = rows[0];
    return row ? { key: req.key, epoch, at: atOf(row) } : null;
  }

  /**
   * Evicts a key whatever its state, so the next claim executes again; fences any current
   * holder (its epoch becomes stale). Who and why belong in the audit trail.
   */
  async invalidate(
    key: KeyLike,
    by: OperatorFacts = {},
    executor?: LedgerExecutor,
  ): Promise<WriteReceipt & { previousStatus: LedgerStatus }> {
    const k = toKey(key);
    const rows = await this.run(
      'invalidate',
      { key: k, clockOffsetMs: this.clockOffsetMs, ...operatorColumns(by) },
      executor,
    );
    const row = rows[0];
    if (!row) throw new IllegalTransitionError({ key: k, from: null, action: 'invalidate' });
    return {
      key: k,
      epoch: row.epoch as number,
      at: atOf(row),
      previousStatus: row.previous_status as LedgerStatus,
    };
  }

  /**
   * Settles an `unknown` record: `committed` records the result an operator or reconcile hook
   * found; not committed makes the key claimable again. Any other state is refused.
   */
  async resolve(
    key: KeyLike,
    outcome: ResolveOutcome,
    by: OperatorFacts = {},
    executor?: LedgerExecutor,
  ): Promise<WriteReceipt> {
    const k = toKey(key);
    const text = outcome.committed ? this.encodeResult(this.sealed(outcome.result, k)) : null;
    const params = {
      key: k,
      resultJson: text,
      committed: outcome.committed,
      clockOffsetMs: this.clockOffsetMs,
      ...operatorColumns(by),
    };
    const rows = await this.run('resolve', params, executor);
    const row = rows[0];
    if (!row) {
      const cur = (await this.run('current', { key: k }, executor))[0];
      throw new IllegalTransitionError({
        key: k,
        from: (cur?.status as string | undefined) ?? null,
        action: 'resolve',
      });
    }
    return { key: k, epoch: row.epoch as number, at: atOf(row) };
  }

  /**
   * Deletes expired terminal rows among the next `batchSize` (never locked or unknown ones; rows
   * another transaction holds are skipped). A row's recorded transitions go with it, so a row is
   * deleted only when every audit event `eventIds` names for it is stored in `audit_events` (the
   * sweeper names those of its transitions but the ones older than the audit retention's horizon,
   * whose partition is dropped); the others are returned as `pending` (store their events, see
   * `keptEventsForRecord`, and a later sweep deletes them). Pass `next` back as `after` to go on past
   * them. The candidates are found by the index on `sweep_after` from `after` (see
   * migrations/0010-ledger-sweep-index.ts), so fewer than `batchSize` means no more are expired.
   */
  async sweepPage(batchSize: number, after: SweepCursor | undefined, eventIds: SweepEventIds): Promise<SweepPage> {
    if (!Number.isInteger(batchSize) || batchSize < 1) {
      throw new IdempotencyConfigError('batchSize must be a positive integer', { option: 'batchSize' });
    }
    const client = await this.pool.connect();
    try {
      await client.query('begin');
      const rows = (
        await runStatement(
          client,
          this.names.sweepCandidates,
          this.sql.sweepCandidates,
          statementValues('sweepCandidates', {
            batchSize,
            afterAt: after?.at ?? '-infinity',
            afterKey: after?.key ?? '',
            clockOffsetMs: this.clockOffsetMs,
          }),
        )
      ).rows as Row[];
      const records = rows.map(toRecord);
      // A row from before transitions were recorded has no record to keep: it goes as it did.
      const ids = records.map((r) => (r.transitions === null ? [] : eventIds(r)));
      const all = ids.flat();
      const stored = new Set<string>(
        all.length === 0
          ? []
          : (
              await runStatement(
                client,
                this.names.storedEventIds,
                this.sql.storedEventIds,
                statementValues('storedEventIds', { eventIds: all }),
              )
            ).rows.map((r) => (r as Row).event_id as string),
      );
      const done: string[] = [];
      const pending: LedgerRecord[] = [];
      records.forEach((r, i) => {
        if ((ids[i] as readonly string[]).every((id) => stored.has(id))) done.push(r.key);
        else pending.push(r);
      });
      if (done.length > 0)
        await runStatement(
          client,
          this.names.sweepKeys,
          this.sql.sweepKeys,
          statementValues('sweepKeys', { keys: done }),
        );
      await client.query('commit');
      const last = rows[rows.length - 1];
      return {
        deleted: done.length,
        scanned: rows.length,
        pending,
        next: last ? { at: last.cursor_at as string, key: last.key as string } : undefined,
      };
    } catch (err) {
      await client.query('rollback').catch(() => {});
      throw err;
    } finally {
      client.release();
    }
  }

  /**
   * Deletes up to `batchSize` expired terminal rows whose audit events `eventIds` names are all
   * stored (see {@link sweepPage}); never locked or unknown ones. Returns the count.
   */
  async sweepExpired(batchSize: number, eventIds: SweepEventIds): Promise<number> {
    return (await this.sweepPage(batchSize, undefined, eventIds)).deleted;
  }

  /** The full record of a key, or null. */
  async get(key: KeyLike): Promise<LedgerRecord | null> {
    const row = (await this.run('get', { key: toKey(key) }))[0];
    if (!row) return null;
    const record = toRecord(row);
    return this.keyring && record.result !== null
      ? { ...record, result: this.opened(record.result, record.key, record.operation) }
      : record;
  }

  /** Closes the pool if the ledger opened it. */
  async close(): Promise<void> {
    await this.statistics?.settled();
    if (this.owned) await this.pool.end();
  }

  private async finish(
    key: KeyLike,
    epoch: number,
    error: RecordedError | null,
    transition: Exclude<OutcomeTransition, 'completed'>,
    retryable: boolean | null,
    reasonCode: string | null = null,
  ): Promise<WriteReceipt> {
    const k = toKey(key);
    const errText = error ? JSON.stringify(boundError(this.sealedError(error, k))) : null;
    const status = TRANSITIONS[transition].to;
    const rows = await this.run('finish', {
      key: k,
      epoch,
      errorJson: errText,
      status,
      transition,
      retryable,
      reasonCode,
      clockOffsetMs: this.clockOffsetMs,
    });
    if (!rows[0]) throw await this.fenced(k, epoch, transition);
    return { key: k, epoch, at: atOf(rows[0]) };
  }

  /** A result as this ledger stores it: sealed for the key's row when it has a keyring, else as given. */
  private sealed(result: unknown, key: string): unknown {
    return this.keyring ? { [SEALED]: this.keyring.seal(result, { purpose: 'result', operation: '', key }) } : result;
  }

  /**
   * A stored result as a replay returns it: opened when this ledger has a keyring, after checking
   * it was sealed for this row (its key, and no operation or the row's). With a keyring, a result
   * in clear is refused (`IDEMPOTENCY_SEAL_REQUIRED`), and one sealed for another row too
   * (`IDEMPOTENCY_SEAL_MISPLACED`).
   */
  private opened(stored: unknown, key: string, operation: string): unknown {
    if (!this.keyring) return stored;
    const sealed = isObject(stored) ? stored[SEALED] : undefined;
    if (typeof sealed !== 'string') throw new SealError(ERROR_CODES.sealRequired, { purpose: 'result' });
    const { value, place } = this.keyring.openPlaced(sealed, 'result');
    const mismatch = [
      ...(place.key === key ? [] : ['key']),
      ...(place.operation === '' || place.operation === operation ? [] : ['operation']),
      ...((place.field ?? '') === '' ? [] : ['field']),
    ];
    if (mismatch.length > 0)
      throw new SealError(ERROR_CODES.sealMisplaced, { keyId: null, purpose: 'result', mismatch });
    return value;
  }

  /** An error as this ledger stores it: with a keyring and no seal of its own, its message sealed for the key's row. */
  private sealedError(error: RecordedError, key: string): RecordedError {
    if (!this.keyring || typeof error.sealed === 'string') return error;
    const message = String(error.message ?? '');
    const text = { name: error.name ?? 'Error', code: error.code, message, text: message };
    return {
      ...error,
      message: `sealed message, ${Buffer.byteLength(message)} bytes`,
      sealed: this.keyring.seal(text, { purpose: 'error', operation: '', key }),
    };
  }

  private encodeResult(result: unknown): string {
    const text = canonicalJson(result);
    if (text.includes('\\u0000') && JSON_NUL.test(text)) {
      // Refused here, for this result alone: in the batched completion it would fail every row.
      throw new SerializationError({
        path: '$',
        reason: 'a string contains a NUL character, which Postgres cannot store',
      });
    }
    const bytes = Buffer.byteLength(text);
    if (bytes > this.maxResultBytes) {
      throw new PayloadTooLargeError({ what: 'result', bytes, limit: this.maxResultBytes });
    }
    return text;
  }

  /**
   * Explains why a fenced write matched no row: a stale epoch (a later attempt holds the key), a
   * record not in `locked`, or a lost record: no row, or a row at a lower epoch than the one the
   * writer holds. Epochs only rise, so the last two mean the row the claim wrote is gone (a
   * restore, a promoted asynchronous standby): never stale, see {@link RecordLostError}.
   */
  private async fenced(key: string, epoch: number, operation: string, executor?: LedgerExecutor): Promise<Error> {
    const cur = (await this.run('current', { key }, executor))[0];
    const currentEpoch = (cur?.epoch as number | undefined) ?? null;
    const currentStatus = (cur?.status as string | undefined) ?? null;
    if (currentEpoch === epoch) {
      return new IllegalTransitionError({ key, from: currentStatus, action: operation });
    }
    if (currentEpoch === null || currentEpoch < epoch) {
      this.lost++;
      return new RecordLostError({ key, epoch, operation, currentEpoch, currentStatus });
    }
    this.metrics.staleWrites++;
    return new StaleEpochError({ key, epoch, operation, currentEpoch, currentStatus });
  }

  private async run<N extends StatementName>(name: N, params: ParamsOf<N>, executor?: LedgerExecutor): Promise<Row[]> {
    const text = this.sql[name];
    const values = statementValues(name, params);
    if (executor) {
      const res = await executor.executeQuery(CompiledQuery.raw(text, values));
      return res.rows as Row[];
    }
    const res = await runStatement(this.pool, this.names[name], text, values);
    return res.rows as Row[];
  }
}

/**
 * The row a plain insert created, from what the claim asked for and the database time it
 * returned: status locked at epoch 1, the lease running from that time.
 */
function newRow(req: ClaimRow, inserted: Row): Row {
  const at = Number(inserted.at_ms);
  return {
    key: req.key,
    acquired: true,
    claimable: true,
    status: 'locked',
    epoch: 1,
    fingerprint: req.claim.fingerprint,
    transition: 'claimed',
    lease_expires_ms: at + req.claim.leaseMs,
    at_ms: inserted.at_ms,
  };
}

/** A claim's options as the claim statements take them (checked). */
function claimRowOf(options: ClaimOptions): ClaimRow {
  const key = parseIdempotencyKey(options.key);
  checkPositiveMs('leaseMs', options.leaseMs);
  checkPositiveMs('retentionMs', options.retentionMs);
  const k = boundedKey(key);
  // The parts are stored only when the key is hashed: otherwise the key spells them. Only the
  // hashed form holds '#' (a canonical string never does), so the canonical string is not made again.
  const hashed = k.includes('#');
  return {
    key: k,
    claim: {
      key: k,
      namespace: hashed ? key.namespace : null,
      resourceKey: hashed ? key.resourceKey : null,
      version: hashed ? key.version : null,
      operation: storableText(options.operation),
      fingerprint: options.fingerprint,
      leaseMs: options.leaseMs,
      retentionMs: options.retentionMs,
      downstream: options.downstream,
      owner: textColumn(options.owner),
      jobId: textColumn(options.jobId),
      queue: textColumn(options.queue),
      taskId: textColumn(options.taskId),
      stepId: textColumn(options.stepId),
    },
  };
}

/** Rows in key order (batches lock their rows in that order), a copy when there is more than one. */
function inKeyOrder<T extends { key: string }>(rows: readonly T[]): readonly T[] {
  return rows.length > 1 ? [...rows].sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0)) : rows;
}

/** The claim statements' named parameters: the claims in the given order. */
function claimsOf(rows: readonly ClaimRow[], clockOffsetMs: number): ParamsOf<'claim'> {
  return { claims: rows.map((r) => r.claim), clockOffsetMs };
}

function toKey(key: KeyLike): string {
  if (typeof key === 'string') {
    if (key.length === 0 || key.length > 255) {
      throw new InvalidInputError('key', [
        { path: 'key', message: 'must be a bounded key string of 1..255 characters' },
      ]);
    }
    return key;
  }
  return boundedKey(parseIdempotencyKey(key));
}

function checkPositiveMs(option: string, value: number): void {
  if (!Number.isFinite(value) || value <= 0 || !Number.isInteger(value)) {
    throw new IdempotencyConfigError(`${option} must be a positive whole number of milliseconds, got ${value}`, {
      option,
    });
  }
}

function boundError(error: RecordedError): RecordedError {
  // Cut, then made storable: a cut may split a surrogate pair.
  const code = storableText(
    typeof error.code === 'string' && error.code.length > 0 ? error.code.slice(0, 100) : 'UNKNOWN',
  );
  const message = storableText(String(error.message ?? '').slice(0, MAX_ERROR_MESSAGE_LENGTH));
  const out: RecordedError = { code, message };
  if (error.name) out.name = storableText(String(error.name).slice(0, 100));
  // Sealed text is base64url: storable as it is, and never cut (a cut seal cannot be opened).
  if (typeof error.sealed === 'string') out.sealed = error.sealed;
  return out;
}

/** An optional free-text column of a claim (operation, owner, job id, queue, task, step). */
const textColumn = (v: string | undefined): string | null => (v === undefined ? null : storableText(v));

/** A NUL character escaped in JSON text, not preceded by an escaped backslash. */
const JSON_NUL = /(?:^|[^\\])(?:\\\\)*\\u0000/;

function toOutcome(row: Row, fp: string): ClaimOutcome {
  const key = row.key as string;
  const epoch = row.epoch as number;
  const at = atOf(row);
  const status = row.status as LedgerStatus;
  if (row.acquired) {
    const transition = claimTransitionOf(row);
    if (!TRANSITIONS[transition].startsAttempt) {
      return { kind: 'unknown', key, epoch, error: row.error as RecordedError, transitioned: true, at };
    }
    return {
      kind: 'acquired',
      key,
      epoch,
      leaseExpiresAt: msDate(row.lease_expires_ms),
      transition: transition as AcquiringTransition,
      at,
    };
  }
  if (row.fingerprint !== fp) {
    return { kind: 'conflict', key, status, storedFingerprint: row.fingerprint as string, fingerprint: fp, at };
  }
  switch (status) {
    case 'completed':
      return {
        kind: 'completed',
        key,
        epoch,
        result: row.result,
        completedAt: msDate(row.completed_ms),
        expiresAt: msDate(row.expires_ms),
        at,
      };
    case 'failed':
      return { kind: 'failed', key, epoch, error: row.error as RecordedError, expiresAt: msDate(row.expires_ms), at };
    case 'locked':
      return {
        kind: 'inProgress',
        key,
        epoch,
        leaseExpiresAt: msDate(row.lease_expires_ms),
        retryAfterMs: Number(row.retry_after_ms),
        at,
      };
    case 'unknown':
      return {
        kind: 'unknown',
        key,
        epoch,
        error: (row.error as RecordedError | null) ?? null,
        transitioned: false,
        at,
      };
    default:
      // released/invalidated with the same fingerprint are claimable and never reach here.
      throw new IllegalTransitionError({ key, from: status, action: 'claim' });
  }
}

/**
 * The claim transition a claim statement says it made (its `transition` column). Anything else is
 * refused with a library error naming the key, never read as a transition: a statement that
 * wrote a row and answered no transition would otherwise surface as a TypeError after the write.
 */
function claimTransitionOf(row: Row): ClaimTransition {
  const name = row.transition;
  const spec = typeof name === 'string' ? transitionSpec(name) : undefined;
  if (spec?.by !== 'claim') {
    throw new IllegalTransitionError({
      key: row.key as string,
      from: (row.status as string | undefined) ?? null,
      action: `read the claim transition (${JSON.stringify(name ?? null)}, not a claim transition) of`,
    });
  }
  return name as ClaimTransition;
}

/**
 * Maps a raw `idempotency_ledger` row (snake_case) to a record. What the row leaves out (migration
 * 0008) is derived: the key's parts from the key when it is not hashed; the last transition, the
 * current epoch's claim and its time, the creation time, and a completed row's job id and queue
 * from the record of transitions; the completion time and the expiry from the last transition's
 * time (and the retention). The columns still hold them for rows written before.
 */
export function toRecord(row: Row): LedgerRecord {
  const key = row.key as string;
  const transitions = parseTransitions(row.transitions);
  const parts = row.namespace === null || row.namespace === undefined ? partsOfKey(key) : undefined;
  const lastClaim = transitions?.findLast((t) => TRANSITIONS[t.transition].by === 'claim');
  const status = row.status as LedgerStatus;
  const updatedAt = row.updated_at as Date;
  return {
    key,
    namespace: parts ? parts[0] : (row.namespace as string),
    resourceKey: parts ? parts[1] : (row.resource_key as string),
    version: parts ? parts[2] : (row.version as string),
    operation: row.operation as string,
    fingerprint: fingerprintText(row.fingerprint),
    status,
    epoch: row.epoch as number,
    downstream: row.downstream as LedgerRecord['downstream'],
    leaseOwner: nullable<string>(row.lease_owner),
    leaseExpiresAt: nullable<Date>(row.lease_expires_at),
    retentionMs: Number(row.retention_ms),
    result: row.result ?? null,
    error: nullable<RecordedError>(row.error),
    retryable: nullable<boolean>(row.retryable),
    lastTransition: (nullable<Transition>(row.last_transition) ?? transitions?.at(-1)?.transition) as Transition,
    // A completion clears them: the current claim's entry in the record holds them.
    jobId: nullable<string>(row.job_id) ?? lastClaim?.jobId ?? null,
    queue: nullable<string>(row.queue) ?? lastClaim?.queue ?? null,
    taskId: nullable<string>(row.task_id),
    stepId: nullable<string>(row.step_id),
    createdAt: nullable<Date>(row.created_at) ?? (transitions?.[0]?.at as Date),
    updatedAt,
    claimedAt: lastClaim?.at ?? (row.claimed_at as Date),
    claimTransition: lastClaim?.transition ?? (row.claim_transition as Transition),
    completedAt: nullable<Date>(row.completed_at) ?? (status === 'completed' ? updatedAt : null),
    expiresAt:
      nullable<Date>(row.expires_at) ??
      (TERMINAL_STATES.has(status) ? new Date(updatedAt.getTime() + Number(row.retention_ms)) : null),
    transitions,
  };
}

/** The states in which a row expires after its retention (and may be swept). */
const TERMINAL_STATES: ReadonlySet<LedgerStatus> = new Set(['completed', 'failed', 'released', 'invalidated']);

/**
 * A fingerprint read from the row (bytes, migration 0009): 32 bytes are a SHA-256 hex digest's;
 * others are UTF-8 text, a NUL byte after one of exactly 32 bytes.
 */
function fingerprintText(value: unknown): string {
  if (typeof value === 'string') return value;
  const bytes = value as Buffer;
  if (bytes.length === 32) return bytes.toString('hex');
  const end = bytes.at(-1) === 0 ? bytes.length - 1 : bytes.length;
  return bytes.subarray(0, end).toString('utf8');
}

/** The parts of a key that is not hashed: its canonical string's percent-encoded parts. */
function partsOfKey(key: string): [string, string, string] {
  const [namespace = '', resourceKey = '', version = ''] = key.split(':').map((p) => decodeURIComponent(p));
  return [namespace, resourceKey, version];
}

/** The database time a statement returned, in whole milliseconds (as its recorded transition has it). */
const atOf = (row: Row): Date => new Date(Number(row.at_ms));

/** A time a claim returned as whole milliseconds (int8: the driver gives it as text; a number from newRow). */
const msDate = (v: unknown): Date => new Date(Number(v));

/** The operator's columns of invalidate and resolve: actor and reason, storable, or null. */
const operatorColumns = (by: OperatorFacts) => ({ actorId: textColumn(by.actorId), reason: textColumn(by.reason) });

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
