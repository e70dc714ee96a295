import type { Migration } from 'kysely';
import { ledgerMigration } from './0001-ledger.js';
import { auditMigration } from './0002-audit.js';

/** Every migration of the library, by name, in order, for one schema. */
export function allMigrations(schema: string): Record<string, Migration> {
  return {
    '0001-ledger': ledgerMigration(schema),
    '0002-audit': auditMigration(schema),
  };
}
