/**
 * The timeline's lookups of audit_events by task id or operation key (migrations/0020): their
 * indexes hold `hashtextextended(column, 0)`, so a lookup asks for the hashes of the values, then
 * keeps the rows whose column holds one of the values (two ids may share a hash).
 */

/**
 * Rows of alias `a` whose `column` (task_id or operation_id) is one of the text array `values` (a
 * parameter). Both conditions read the values through a sub-select, so that no plan depends on
 * them: a plan for some values costs what the generic plan costs, and Postgres keeps the generic
 * plan of a named statement after its first custom ones. The read names no partition key, so its
 * plan holds every partition of audit_events: with a year of daily partitions, planning it costs
 * 20–70 ms and running it a few milliseconds.
 */
export const lookupSql = (a: string, column: 'task_id' | 'operation_id', values: string) =>
  `hashtextextended(${a}.${column}, 0) = any(array(select hashtextextended(v, 0) from unnest(${values}) v))
       and ${a}.${column} = any(array(select unnest(${values})))`;
