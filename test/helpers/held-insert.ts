import { boundedKey } from '../../src/keys/idempotency-key.js';
import { LEDGER_STATEMENTS, statementValues } from '../../src/ledger/sql/index.js';
import { tablesOf } from '../../src/ledger/sql/statement.js';
import type { ClaimOptions } from '../../src/ledger/types.js';
import { type TestContext, waitFor } from './context.js';

/**
 * Another claimer's insert of `claim`'s key (owner `other`), begun and not committed: a ledger's
 * statement that inserts the same key waits on it, and fails with a unique violation once it
 * commits. Run `whileHeld` with the insert held; it waits for a statement of the test's to wait
 * on a lock and commits the held insert (`commitWhenWaitedOn`).
 */
export async function withHeldInsert<T>(
  t: TestContext,
  claim: ClaimOptions,
  whileHeld: (commitWhenWaitedOn: () => Promise<void>) => Promise<T>,
): Promise<T> {
  const adminPool = t.pool(1);
  const admin = await adminPool.connect();
  try {
    await admin.query('begin');
    await admin.query(
      LEDGER_STATEMENTS.insertNew.text(tablesOf(t.schema)),
      statementValues('insertNew', {
        clockOffsetMs: 0,
        claims: [
          {
            key: boundedKey(claim.key as never),
            namespace: null,
            resourceKey: null,
            version: null,
            operation: claim.operation,
            fingerprint: claim.fingerprint,
            leaseMs: 30_000,
            retentionMs: 60_000,
            downstream: claim.downstream,
            owner: 'other',
            jobId: null,
            queue: null,
            taskId: null,
            stepId: null,
          },
        ],
      }),
    );
    return await whileHeld(async () => {
      await waitFor(async () => {
        const r = await t.query<{ n: string }>(
          `select count(*) as n from pg_stat_activity where application_name = $1 and wait_event_type = 'Lock'`,
          [t.tag],
        );
        return Number(r.rows[0]?.n) > 0;
      }, 'a statement to wait on the held insert');
      await admin.query('commit');
    });
  } finally {
    admin.release();
    await adminPool.end();
  }
}
