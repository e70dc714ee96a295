import type { Kysely } from 'kysely';
import type pg from 'pg';
import { checkSchema, DEFAULT_SCHEMA, kyselyFor, openPool } from '../db/connection.js';
import { DEFAULT_PREPARED_STATEMENTS } from '../db/prepared-statements.js';
import { StatisticsRefresh } from '../db/statistics-refresh.js';
import {
  IdempotencyConfigError,
  IdempotencyInProgressError,
  IllegalTransitionError,
  RecordLostError,
  StaleEpochError,
} from '../errors/errors.js';
import {
  atOf,
  type ClaimRow,
  checkPositiveMs,
  claimRowOf,
  textColumn,
  toKey,
  toOutcome,
  writtenClaim,
} from './claim-rows.js';
import { Claimer, type CompletedRow } from './claimer.js';
import { type LedgerMetrics, ledgerMetrics } from './ledger-metrics.js';
import {
  DEFAULT_MAX_RESULT_BYTES,
  type LedgerExecutor,
  type LedgerOptions,
  type OperatorFacts,
  type SweepCursor,
  type SweepEventIds,
  type SweepPage,
} from './ledger-options.js';
import { toRecord } from './ledger-record.js';
import { DEFAULT_OVERLAP_AFTER_MS, MicroBatcher } from './micro-batcher.js';
import type { ClaimAnswerRow } from './sql/claim.js';
import type { Completion } from './sql/complete.js';
import { StatementRunner } from './statement-runner.js';
import { boundError, StoredValues } from './stored-values.js';
import { sweepPage } from './sweep.js';
import { type OutcomeTransition, TRANSITIONS } from './transitions.js';
import type {
  ClaimOptions,
  ClaimOutcome,
  KeyLike,
  LedgerRecord,
  LedgerStatus,
  RecordedError,
  ResolveOutcome,
  WriteReceipt,
} from './types.js';

export {
  DEFAULT_MAX_RESULT_BYTES,
  type LedgerExecutor,
  type LedgerKeyring,
  type LedgerOptions,
  type LedgerSealPlace,
  MAX_ERROR_MESSAGE_LENGTH,
  type OperatorFacts,
  type SweepCursor,
  type SweepEventIds,
  type SweepPage,
} from './ledger-options.js';

const MAX_CLAIM_ROUNDS = 8;

/** A write of the write batcher: a claim (insert first) or a completion, of one key. */
type WriteRequest =
  | { key: string; claim: ClaimRow; completion?: undefined }
  | { key: string; completion: Completion; claim?: undefined };

const claimsIn = (reqs: readonly WriteRequest[]): ClaimRow[] => reqs.flatMap((r) => (r.claim ? [r.claim] : []));
const completionsIn = (reqs: readonly WriteRequest[]): Completion[] =>
  reqs.flatMap((r) => (r.completion ? [r.completion] : []));

/**
 * The Postgres idempotency ledger: the durable truth every attempt must pass before it may
 * touch the outside world. Knows nothing of BullMQ. Each method runs statements of
 * `src/ledger/sql/` (one file per statement, its text beside it as `.sql`).
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
  /** Stale writes, claims, lost records, pool errors, tables analyzed (see {@link LedgerMetrics}). */
  readonly metrics: LedgerMetrics;
  private readonly owned: boolean;
  /** See `metrics.lostRecords`. */
  private lost = 0;
  private readonly sql: StatementRunner;
  private readonly values: StoredValues;
  private readonly clockOffsetMs: number;
  private kysely: Kysely<unknown> | undefined;
  private readonly claimer: Claimer;
  private readonly claimBatcher: MicroBatcher<ClaimRow, ClaimAnswerRow> | undefined;
  /**
   * The writes of fresh jobs: completions, and claims while recent keys were mostly new (the
   * claimer goes insert first then); a batch of both is one statement and one commit.
   */
  private readonly writeBatcher: MicroBatcher<WriteRequest, ClaimAnswerRow | CompletedRow> | undefined;
  /** Analyzes a young table so that named statements' cached plans use its index (named statements only). */
  private readonly statistics: StatisticsRefresh | undefined;

  constructor(options: LedgerOptions) {
    this.schema = checkSchema(options.schema ?? DEFAULT_SCHEMA);
    const { pool, owned } = openPool(options, options.poolSize ?? 10);
    this.pool = pool;
    this.owned = owned;
    const prepared = options.preparedStatements ?? DEFAULT_PREPARED_STATEMENTS;
    const statistics = prepared ? new StatisticsRefresh(pool, `${this.schema}.idempotency_ledger`) : undefined;
    this.statistics = statistics;
    this.metrics = ledgerMetrics(pool, statistics, () => this.lost);
    this.sql = new StatementRunner(pool, this.schema, prepared);
    const maxResultBytes = options.maxResultBytes ?? DEFAULT_MAX_RESULT_BYTES;
    this.values = new StoredValues(options.keyring, maxResultBytes);
    this.clockOffsetMs = Math.trunc(options.clockOffsetMs ?? 0);
    this.claimer = new Claimer(this.sql, this.clockOffsetMs, statistics);
    if (options.batching !== false) {
      const maxBatch = options.batching?.maxBatch ?? 200;
      const maxInFlight = options.batching?.maxInFlight ?? 4;
      const overlap = options.batching?.overlapAfterMs ?? DEFAULT_OVERLAP_AFTER_MS;
      this.claimBatcher = new MicroBatcher((rows) => this.claimer.claimBatch(rows), maxBatch, maxInFlight, overlap);
      this.writeBatcher = new MicroBatcher(
        (reqs) => this.claimer.writeBatch(claimsIn(reqs), completionsIn(reqs)),
        maxBatch,
        maxInFlight,
        overlap,
      );
    }
    if (!(maxResultBytes > 0)) {
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
      const row = this.claimBatcher ? await this.batchedClaim(req) : (await this.claimer.claimBatch([req])).get(k);
      // No row, or a snapshot that looked claimable while a concurrent claimer won: read again.
      if (!row || (!row.acquired && row.claimable)) continue;
      const outcome = toOutcome(row, options.fingerprint);
      // A ledger without a keyring returns results as stored: the outcome is already the answer.
      return outcome.kind === 'completed' && this.values.seals
        ? { ...outcome, result: this.values.opened(outcome.result, k, options.operation) }
        : outcome;
    }
    // Every round saw a concurrent writer win between its read and its write: let the caller retry.
    throw new IdempotencyInProgressError({ key: k, retryAfterMs: 0 });
  }

  /**
   * A claim through the batchers. Insert first (recent keys mostly new): it goes with the
   * completions waiting to be written, in one statement; a key the insert found with a row goes
   * on to the full claim.
   */
  private async batchedClaim(req: ClaimRow): Promise<ClaimAnswerRow | undefined> {
    const claims = this.claimBatcher as MicroBatcher<ClaimRow, ClaimAnswerRow>;
    if (!this.writeBatcher || !this.claimer.insertFirst) return claims.submit(req);
    const inserted = (await this.writeBatcher.submit({ key: req.key, claim: req })) as ClaimAnswerRow | undefined;
    return inserted ?? claims.submit({ ...req, hasRow: true });
  }

  /** Extends the lease of the attempt holding `epoch`. Throws {@link StaleEpochError} when fenced. */
  async heartbeat(key: KeyLike, epoch: number, leaseMs: number): Promise<WriteReceipt & { leaseExpiresAt: Date }> {
    checkPositiveMs('leaseMs', leaseMs);
    const k = toKey(key);
    const rows = await this.sql.run('heartbeat', { key: k, epoch, leaseMs, clockOffsetMs: this.clockOffsetMs });
    const row = rows[0];
    if (!row) throw await this.fenced(k, epoch, 'heartbeat');
    return { key: k, epoch, at: row.at, leaseExpiresAt: row.lease_expires_at };
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
    const text = this.values.encodeResult(this.values.sealed(result, k));
    const req = { key: k, epoch, text };
    const row = executor
      ? (await this.sql.run('complete', { completions: [req], clockOffsetMs: this.clockOffsetMs }, executor))[0]
      : this.writeBatcher
        ? ((await this.writeBatcher.submit({ key: k, completion: req })) as CompletedRow | undefined)
        : (await this.claimer.writeBatch([], [req])).get(k);
    if (!row) throw await this.fenced(k, epoch, 'complete', executor);
    return { key: k, epoch, at: new Date(Number(row.at_ms)), result: this.values.opened(JSON.parse(text), k, '') };
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
    const rows = await this.sql.run('recordLost', {
      claims: [writtenClaim(req)],
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
    const params = { key: k, clockOffsetMs: this.clockOffsetMs, ...operatorColumns(by) };
    const row = (await this.sql.run('invalidate', params, executor))[0];
    if (!row) throw new IllegalTransitionError({ key: k, from: null, action: 'invalidate' });
    return { key: k, epoch: row.epoch, at: atOf(row), previousStatus: row.previous_status };
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
    const text = outcome.committed ? this.values.encodeResult(this.values.sealed(outcome.result, k)) : null;
    const params = {
      key: k,
      resultJson: text,
      committed: outcome.committed,
      clockOffsetMs: this.clockOffsetMs,
      ...operatorColumns(by),
    };
    const row = (await this.sql.run('resolve', params, executor))[0];
    if (!row) {
      const cur = (await this.sql.run('current', { key: k }, executor))[0];
      throw new IllegalTransitionError({ key: k, from: cur?.status ?? null, action: 'resolve' });
    }
    return { key: k, epoch: row.epoch, at: atOf(row) };
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
    return sweepPage(this.pool, this.sql, this.clockOffsetMs, batchSize, after, eventIds);
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
    const row = (await this.sql.run('get', { key: toKey(key) }))[0];
    if (!row) return null;
    const record = toRecord(row);
    return this.values.seals && record.result !== null
      ? { ...record, result: this.values.opened(record.result, record.key, record.operation) }
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
    const rows = await this.sql.run('finish', {
      key: k,
      epoch,
      errorJson: error ? this.values.errorJson(error, k) : null,
      status: TRANSITIONS[transition].to,
      transition,
      retryable,
      reasonCode,
      clockOffsetMs: this.clockOffsetMs,
    });
    if (!rows[0]) throw await this.fenced(k, epoch, transition);
    return { key: k, epoch, at: atOf(rows[0]) };
  }

  /**
   * Explains why a fenced write matched no row: a stale epoch (a later attempt holds the key), a
   * record not in `locked`, or a lost record: no row, or a row at a lower epoch than the one the
   * writer holds. Epochs only rise, so the last two mean the row the claim wrote is gone (a
   * restore, a promoted asynchronous standby): never stale, see {@link RecordLostError}.
   */
  private async fenced(key: string, epoch: number, operation: string, executor?: LedgerExecutor): Promise<Error> {
    const cur = (await this.sql.run('current', { key }, executor))[0];
    const currentEpoch = cur?.epoch ?? null;
    const currentStatus = cur?.status ?? null;
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
}

/** The operator's columns of invalidate and resolve: actor and reason, storable, or null. */
const operatorColumns = (by: OperatorFacts) => ({ actorId: textColumn(by.actorId), reason: textColumn(by.reason) });

/**
 * What an attempt asks of the ledger: the worker holds a ledger as this, so an observer can stand
 * in front of it (see `ObservedLedger`). A {@link PostgresLedger} is one.
 */
export type AttemptLedger = Pick<
  PostgresLedger,
  | 'schema'
  | 'pool'
  | 'db'
  | 'claim'
  | 'complete'
  | 'fail'
  | 'release'
  | 'markUnknown'
  | 'recordLost'
  | 'heartbeat'
  | 'get'
>;
