/** A row as `pg` returns it: column names (snake_case) to values. */
export type Row = Record<string, unknown>;

/**
 * A nullable column's value as `T`, or `null` for SQL NULL (and for a column the statement did
 * not return). The cast is the caller's knowledge of the schema; nothing is checked.
 *
 * @example nullable<Date>(row.completed_at)
 */
export function nullable<T>(value: unknown): T | null {
  return (value ?? null) as T | null;
}
