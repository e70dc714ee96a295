/** What the WAL helpers need of a pool or a client. */
type Queryable = { query(text: string, values?: unknown[]): Promise<{ rows: Record<string, unknown>[] }> };

/** The server's current WAL position, as text (`pg_current_wal_lsn`). */
export async function walPosition(db: Queryable): Promise<string> {
  return (await db.query('select pg_current_wal_lsn()::text as l')).rows[0]?.l as string;
}

/** WAL bytes written by the whole server since `from` (a {@link walPosition}). */
export async function walSince(db: Queryable, from: string): Promise<number> {
  return Number((await db.query('select pg_wal_lsn_diff(pg_current_wal_lsn(), $1) as b', [from])).rows[0]?.b);
}
