import type { Migration } from 'kysely';
import { ledgerMigration } from './0001-ledger.js';
import { auditMigration } from './0002-audit.js';
import { auditTimeKeyMigration } from './0003-audit-time-key.js';
import { auditEventIdUniqueMigration } from './0004-audit-event-id-unique.js';
import { ledgerTransitionsMigration } from './0005-ledger-transitions.js';
import { auditPartitionsMigration } from './0006-audit-partitions.js';
import { confirmationsMigration } from './0007-confirmations.js';
import { ledgerCompactMigration } from './0008-ledger-compact.js';
import { ledgerFingerprintBytesMigration } from './0009-ledger-fingerprint-bytes.js';
import { ledgerSweepIndexMigration } from './0010-ledger-sweep-index.js';
import { intentsMigration } from './0011-intents.js';
import { auditChainMigration } from './0013-audit-chain.js';
import { auditChainVersionMigration } from './0014-audit-chain-version.js';
import { auditChainSeededMigration } from './0015-audit-chain-seeded.js';
import { ledgerHotCompletionsMigration } from './0016-ledger-hot-completions.js';
import { auditSlimIndexesMigration } from './0017-audit-slim-indexes.js';
import { auditChainBatchLinkMigration } from './0018-audit-chain-batch-link.js';
import { auditReceiptsMigration } from './0019-audit-receipts.js';
import { auditHashedLookupsMigration } from './0020-audit-hashed-lookups.js';

/** Every migration of the library, by name, in order, for one schema. */
export function allMigrations(schema: string): Record<string, Migration> {
  return {
    '0001-ledger': ledgerMigration(schema),
    '0002-audit': auditMigration(schema),
    '0003-audit-time-key': auditTimeKeyMigration(schema),
    '0004-audit-event-id-unique': auditEventIdUniqueMigration(schema),
    '0005-ledger-transitions': ledgerTransitionsMigration(schema),
    '0006-audit-partitions': auditPartitionsMigration(schema),
    '0007-confirmations': confirmationsMigration(schema),
    '0008-ledger-compact': ledgerCompactMigration(schema),
    '0009-ledger-fingerprint-bytes': ledgerFingerprintBytesMigration(schema),
    '0010-ledger-sweep-index': ledgerSweepIndexMigration(schema),
    '0011-intents': intentsMigration(schema),
    '0013-audit-chain': auditChainMigration(schema),
    '0014-audit-chain-version': auditChainVersionMigration(schema),
    '0015-audit-chain-seeded': auditChainSeededMigration(schema),
    '0016-ledger-hot-completions': ledgerHotCompletionsMigration(schema),
    '0017-audit-slim-indexes': auditSlimIndexesMigration(schema),
    '0018-audit-chain-batch-link': auditChainBatchLinkMigration(schema),
    '0019-audit-receipts': auditReceiptsMigration(schema),
    '0020-audit-hashed-lookups': auditHashedLookupsMigration(schema),
  };
}
