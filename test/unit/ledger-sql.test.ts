/**
 * Each statement of the ledger is one module of src/ledger/sql/, and the text it makes for the
 * default schema (what Postgres receives) is checked in beside it as `<module>.sql`, so a reader
 * sees the whole statement and a change to its text shows as a change to that file. After a
 * deliberate change: `UPDATE_LEDGER_SQL=1 npx vitest run test/unit/ledger-sql.test.ts`.
 */
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { DEFAULT_SCHEMA } from '../../src/db/connection.js';
import { LEDGER_STATEMENTS, type StatementName } from '../../src/ledger/sql/index.js';
import { tablesOf } from '../../src/ledger/sql/statement.js';

const DIR = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'src', 'ledger', 'sql');
/** The modules of src/ledger/sql/ that hold shared parts, not a statement. */
const SHARED = ['index.ts', 'statement.ts', 'fragments.ts', 'claim-input.ts'];
const UPDATE = process.env.UPDATE_LEDGER_SQL === '1';

/** The module of a statement: its name in kebab case. */
const moduleOf = (name: string) => name.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);

const snapshot = (name: StatementName) =>
  `-- The statement \`${name}\` (src/ledger/sql/${moduleOf(name)}.ts) for the schema "${DEFAULT_SCHEMA}",\n` +
  `-- as Postgres receives it. Generated: UPDATE_LEDGER_SQL=1 npx vitest run test/unit/ledger-sql.test.ts\n` +
  `${LEDGER_STATEMENTS[name].text(tablesOf(DEFAULT_SCHEMA))}\n`;

describe('the ledger, one statement per file', () => {
  const names = Object.keys(LEDGER_STATEMENTS) as StatementName[];

  it.each(names)('%s: its text is the one checked in beside it', (name) => {
    const file = join(DIR, `${moduleOf(name)}.sql`);
    if (UPDATE) writeFileSync(file, snapshot(name));
    expect(existsSync(file), `${file} is missing`).toBe(true);
    expect(readFileSync(file, 'utf8')).toBe(snapshot(name));
  });

  it('every module of src/ledger/sql/ is one statement with its .sql, or a shared part', () => {
    const files = readdirSync(DIR);
    const statements = files.filter((f) => f.endsWith('.ts') && !SHARED.includes(f)).map((f) => f.slice(0, -3));
    expect(statements.sort()).toEqual(names.map(moduleOf).sort());
    expect(files.filter((f) => f.endsWith('.sql')).sort()).toEqual(names.map((n) => `${moduleOf(n)}.sql`).sort());
    for (const name of names) {
      // The module exports the statement under its name.
      expect(readFileSync(join(DIR, `${moduleOf(name)}.ts`), 'utf8')).toContain(`export const ${name} = statement<`);
    }
  });
});
