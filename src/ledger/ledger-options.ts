import type { Kysely } from 'kysely';
import type { PostgresOptions } from '../db/connection.js';
import type { LedgerRecord } from './types.js';

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
   * Each key's outcome is the same as with single statements. One batch of each kind is in
   * flight at a time; the next starts beside it, up to `maxInFlight`, only when none has
   * returned for `overlapAfterMs`.
   * @defaultValue `{ maxBatch: 200, maxInFlight: 4, overlapAfterMs: 50 }`; `false` sends one statement per call
   */
  batching?: false | { maxBatch?: number; maxInFlight?: number; overlapAfterMs?: number };
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

export const DEFAULT_MAX_RESULT_BYTES = 1024 * 1024;
export const MAX_ERROR_MESSAGE_LENGTH = 2000;

/** A kysely transaction (or instance) in which a completion should commit. */
export type LedgerExecutor = Kysely<unknown>;
