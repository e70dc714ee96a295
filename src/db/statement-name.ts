import { createHash } from 'node:crypto';

/**
 * Postgres keeps prepared-statement names in a table keyed by NAMEDATALEN - 1 = 63 bytes: a longer
 * name is cut there, and two names that share their first 63 bytes are one statement.
 */
export const MAX_STATEMENT_NAME_BYTES = 63;

/**
 * The name of a prepared statement of the library, unique per statement and schema (names are
 * per connection, and one pool may serve ledgers of several schemas). `bqi_<statement>_<schema>`
 * when that fits in 63 bytes; otherwise `bqh_<statement>_<schema prefix>_<hash of the schema>`,
 * exactly 63 bytes. The `bqh_` prefix keeps the two forms apart: a plain name never equals a
 * hashed one, whatever the schema is called.
 *
 * @example
 * statementName('claim', 'public'); // 'bqi_claim_public'
 */
export function statementName(statement: string, schema: string): string {
  const plain = `bqi_${statement}_${schema}`;
  if (Buffer.byteLength(plain) <= MAX_STATEMENT_NAME_BYTES) return plain;
  const hash = createHash('sha256').update(schema).digest('hex').slice(0, 16);
  const head = `bqh_${statement}_`;
  // Schema names are ASCII identifiers (see checkSchema), so characters are bytes.
  const room = MAX_STATEMENT_NAME_BYTES - head.length - hash.length - 1;
  return `${head}${schema.slice(0, Math.max(0, room))}_${hash}`;
}
