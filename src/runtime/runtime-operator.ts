import { invalidateKey, type OperatorActionResult, resolveKey } from '../audit/operator-actions.js';
import { IdempotencyConfigError, IllegalTransitionError } from '../errors/errors.js';
import { toKey } from '../ledger/claim-rows.js';
import type { KeyLike, LedgerStatus } from '../ledger/types.js';
import { jobIdFor } from '../operation/enqueue.js';
import { type RerunOutcome, rerun } from '../operation/rerun.js';
import { resolvedResult } from '../operation/resolved-result.js';
import type { RuntimeParts } from './runtime-parts.js';
import type { OperatorOptions, RuntimeResolveOutcome } from './runtime-types.js';

/**
 * `idem.invalidate`, `idem.resolve` and `idem.rerun` past the runtime: an operator's decision on a
 * key, with the runtime's store for its audit event, the operations it knows to seal a found
 * result, and its queues to run a job again. Apart from the runtime as the group of methods that
 * act on one key's record rather than on jobs.
 */

export function invalidateWith(
  parts: RuntimeParts,
  key: KeyLike,
  by: OperatorOptions,
): Promise<OperatorActionResult & { previousStatus: LedgerStatus }> {
  return invalidateKey(parts.ledger, key, { actor: by.actor, reason: by.reason, store: parts.store });
}

/** A committed result is checked and sealed as the key's operation (given, or known by name) would seal it. */
export async function resolveWith(
  parts: RuntimeParts,
  key: KeyLike,
  outcome: RuntimeResolveOutcome,
  by: OperatorOptions,
): Promise<OperatorActionResult> {
  const options = { actor: by.actor, reason: by.reason, store: parts.store };
  if (!outcome.committed) return resolveKey(parts.ledger, key, { committed: false }, options);
  const record = await parts.ledger.get(key);
  if (!record) throw new IllegalTransitionError({ key: toKey(key), from: null, action: 'resolve' });
  const operation = outcome.operation ?? parts.operations.get(record.operation);
  const result = resolvedResult(record, outcome.result, parts.options.keyring, { operation });
  return resolveKey(parts.ledger, record.key, { committed: true, result }, options);
}

/** The key's job retried on the queue its record names (or `queue`), under the job id the record keeps. */
export async function rerunWith(parts: RuntimeParts, key: KeyLike, queue: string | undefined): Promise<RerunOutcome> {
  const record = await parts.ledger.get(key);
  const name = queue ?? record?.queue;
  if (!name) {
    throw new IdempotencyConfigError(
      'rerun: the key has no ledger record naming its queue (claimed outside BullMQ, or swept): give { queue }',
      { option: 'queue' },
    );
  }
  const k = record?.key ?? key;
  return rerun(parts.queues.get(name), k, { jobId: record?.jobId ?? jobIdFor(k) });
}
