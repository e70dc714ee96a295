/**
 * The tables a ledger's statements name: its own (`<schema>.idempotency_ledger`) and the audit
 * trail's table of stored event ids (`<schema>.audit_event_ids`, read by the sweep).
 */
export type LedgerTables = { ledger: string; auditEventIds: string };

/** The tables of the ledger in `schema`. */
export const tablesOf = (schema: string): LedgerTables => ({
  ledger: `${schema}.idempotency_ledger`,
  auditEventIds: `${schema}.audit_event_ids`,
});

/** An int8 as the driver returns it: its decimal text (a number when the ledger made the row itself). */
export type Int8 = string | number;

/**
 * One SQL statement of the ledger, in a file of its own under `src/ledger/sql/`: its text for the
 * ledger's tables, the positional values (`$1`, `$2`, … in the text's order) of its named
 * parameters `P`, and the row `R` it returns as the driver gives it. The text each statement makes
 * for the default schema is kept beside it as `<file>.sql` (checked by test/unit/ledger-sql.test.ts).
 */
export type Statement<P, R> = {
  text(tables: LedgerTables): string;
  values(params: P): unknown[];
  /** Never set: carries the type of the returned row. */
  readonly row?: R;
};

/** Declares a statement; the type parameters name its parameters and its row. */
export const statement = <P, R>(s: { text(tables: LedgerTables): string; values(params: P): unknown[] }) =>
  s as Statement<P, R>;

/** The database clock's offset for tests (see `LedgerOptions.clockOffsetMs`); 0 in production. */
export type Clock = { clockOffsetMs: number };

/** Who made an operator's transition and why, as stored (null when not given). */
export type OperatorColumns = { actorId: string | null; reason: string | null };
