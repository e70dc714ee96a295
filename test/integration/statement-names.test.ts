/**
 * Prepared-statement names are per connection and Postgres cuts them at 63 bytes: with the schema
 * in the name, two long schema names sharing a prefix would name one statement. Names stay
 * within 63 bytes and distinct whatever the schema.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrate } from '../../migrations/migrate.js';
import { AuditStore } from '../../src/audit/audit-store.js';
import { MAX_STATEMENT_NAME_BYTES, statementName } from '../../src/db/statement-name.js';
import { LEDGER_STATEMENTS, type StatementName, statementValues } from '../../src/ledger/sql/index.js';
import { tablesOf } from '../../src/ledger/sql/statement.js';
import { sampleAuditEvent } from '../helpers/audit-sample.js';
import { TestContext } from '../helpers/context.js';

const t = new TestContext('statement_names');
const id = randomBytes(4).toString('hex');
/** Two 63-byte schema names (the longest Postgres allows) that differ only in their last byte. */
const long = (last: string) => `t_stmt_${id}_`.padEnd(62, 'x') + last;
const schemas = [long('a'), long('b')] as const;
const statements = [...Object.keys(LEDGER_STATEMENTS), 'audit_insert', 'audit_insert_absorbing'];

beforeAll(async () => {
  await t.setup();
  for (const schema of schemas) await migrate({ connectionString: t.databaseUrl, schema });
});
afterAll(async () => {
  for (const schema of schemas) await t.query(`drop schema if exists ${schema} cascade`);
  await t.teardown();
});

describe('statementName', () => {
  it('is the plain name when it fits', () => {
    expect(statementName('claim', 'public')).toBe('bqi_claim_public');
  });

  it('fits in 63 bytes and stays distinct for 63-byte schemas sharing 62 bytes', () => {
    expect(schemas[0]).toHaveLength(63);
    // The plain names, as Postgres would cut them, are one name.
    expect(`bqi_claim_${schemas[0]}`.slice(0, 63)).toBe(`bqi_claim_${schemas[1]}`.slice(0, 63));
    const names = schemas.flatMap((s) => statements.map((k) => statementName(k, s)));
    for (const name of names) expect(Buffer.byteLength(name)).toBeLessThanOrEqual(MAX_STATEMENT_NAME_BYTES);
    expect(new Set(names).size).toBe(names.length);
  });
});

describe('two ledgers of long schemas on one connection', () => {
  it('each prepares and runs its own statements on its own table', async () => {
    const pool = t.pool(1); // one connection: both ledgers' statements are prepared on it
    try {
      const ledgers = schemas.map((schema) => t.ledger({ pool, schema, batching: false }));
      for (let round = 0; round < 2; round++) {
        for (const [i, ledger] of ledgers.entries()) {
          const claim = await ledger.claim({
            key: { namespace: 'test/statement-names', resourceKey: `r${round}`, version: 'v1' },
            operation: 'names',
            fingerprint: `fp-${i}`,
            leaseMs: 10_000,
            retentionMs: 60_000,
            downstream: 'idempotent',
          });
          expect(claim.kind).toBe('acquired');
          if (claim.kind === 'acquired') await ledger.complete(claim.key, claim.epoch, { schema: i });
        }
      }
      for (const [i, schema] of schemas.entries()) {
        const rows = await t.query<{ fingerprint: string; result: unknown }>(
          `select convert_from(fingerprint, 'UTF8') as fingerprint, result from ${schema}.idempotency_ledger order by key`,
        );
        expect(rows.rows).toEqual([
          { fingerprint: `fp-${i}`, result: { schema: i } },
          { fingerprint: `fp-${i}`, result: { schema: i } },
        ]);
      }
      for (const schema of schemas) {
        const event = sampleAuditEvent('statement-names-test', schema);
        expect((await new AuditStore(pool, schema).writeBatch([event])).inserted).toBe(1);
      }
      await Promise.all(ledgers.map((l) => l.close()));
    } finally {
      await pool.end();
    }
  });
});

describe("the ledger's statement parameters", () => {
  // Any named parameter reads as a value; the batch statements' lists hold one such element.
  const anything: object = new Proxy({}, { get: () => 'x' });
  const params = new Proxy({}, { get: (_, name) => (name === 'claims' || name === 'completions' ? [anything] : 'x') });

  it.each(Object.keys(LEDGER_STATEMENTS))(
    '%s: its named parameters make exactly the values its text numbers',
    (name) => {
      const text = LEDGER_STATEMENTS[name as StatementName].text(tablesOf('s'));
      const numbered = Math.max(...[...text.matchAll(/\$(\d+)/g)].map((m) => Number(m[1])));
      expect(statementValues(name as StatementName, params as never)).toHaveLength(numbered);
    },
  );
});
