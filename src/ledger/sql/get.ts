import type { LedgerStatus, RecordedError } from '../types.js';
import { type Int8, statement } from './statement.js';

/**
 * A row of `idempotency_ledger` as the driver returns it. Since migration 0008 a row leaves null
 * what its record of transitions holds (`last_transition`, `created_at`, `claimed_at`, …); rows
 * written before keep them.
 */
export type LedgerTableRow = {
  key: string;
  namespace: string | null;
  resource_key: string | null;
  version: string | null;
  operation: string;
  /** Bytes since migration 0009 (see fragments.ts, fpBytes). */
  fingerprint: Buffer | string;
  status: LedgerStatus;
  epoch: number;
  downstream: string;
  lease_owner: string | null;
  lease_expires_at: Date | null;
  retention_ms: Int8;
  result: unknown;
  error: RecordedError | null;
  retryable: boolean | null;
  last_transition: string | null;
  job_id: string | null;
  queue: string | null;
  task_id: string | null;
  step_id: string | null;
  created_at: Date | null;
  updated_at: Date;
  claimed_at: Date | null;
  claim_transition: string | null;
  completed_at: Date | null;
  expires_at: Date | null;
  transitions: string | null;
  sweep_after: Date;
};

/** A key's whole row. Params: 1 key. */
export const get = statement<{ key: string }, LedgerTableRow>({
  text: ({ ledger }) => `select * from ${ledger} where key = $1`,
  values: (p) => [p.key],
});
