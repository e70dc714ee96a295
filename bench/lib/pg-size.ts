import type pg from 'pg';

/**
 * Bytes on disk (heap, TOAST and every index: `pg_total_relation_size`) of each named table of a
 * schema, partitions included (a partitioned table's own size is zero; its partitions hold the
 * rows). Tables that do not exist count zero.
 */
export async function storedBytes(
  db: pg.Pool | pg.Client,
  schema: string,
  tables: string[],
): Promise<{ total: number; parts: [string, number][] }> {
  const parts: [string, number][] = [];
  for (const table of tables) {
    const res = await db.query<{ bytes: string | null }>(
      `select sum(pg_total_relation_size(t.relid))::int8 as bytes
       from (select relid from pg_partition_tree(to_regclass($1)) union select to_regclass($1)) t
       where t.relid is not null`,
      [`${schema}.${table}`],
    );
    parts.push([table, Number(res.rows[0]?.bytes ?? 0)]);
  }
  return { total: parts.reduce((n, [, b]) => n + b, 0), parts };
}
