/**
 * `invalidate`: evicts a key whatever its state, audited as the operator's decision, and with
 * `--rerun` retries the key's finished job so the operation runs again now. A module per command,
 * so running one loads only what it needs.
 */
import type { LedgerRecord } from '../../ledger/types.js';
import { actorLabel } from '../actor.js';
import type { CliContext } from '../context.js';
import { CliError, EXIT, usageError } from '../errors.js';
import { toJson } from '../format.js';
import { getRecord, normalizeKey } from '../keys.js';
import type { OperatorAction } from '../operator-audit.js';
import { operatorOptions, storedOrExplain } from '../operator-event-store.js';

export type InvalidateCommandOptions = {
  reason: string;
  actor: string;
  json?: boolean;
  /** Retry the key's finished BullMQ job after the invalidation, so the operation runs again now. */
  rerun?: boolean;
  /** With `rerun`: the job's queue, when the record names none. */
  queue?: string;
};

export async function invalidateCommand(
  ctx: CliContext,
  keyArg: string,
  opts: InvalidateCommandOptions,
): Promise<void> {
  if (opts.queue !== undefined && !opts.rerun) throw usageError('--queue goes with --rerun only');
  const key = normalizeKey(keyArg);
  ctx.require(...(opts.rerun ? (['DATABASE_URL', 'REDIS_URL'] as const) : (['DATABASE_URL'] as const)));
  const { assertAuditable } = await import('../operator-audit.js');
  const ledger = await ctx.ledger();
  const record = await getRecord(ctx, key);
  // Everything the re-run needs is checked and connected before the ledger changes.
  const target = opts.rerun ? await rerunTarget(ctx, record, opts.queue) : undefined;
  const action: Omit<OperatorAction, 'receipt'> = {
    type: 'invalidated',
    record,
    actorId: opts.actor,
    reason: opts.reason,
    reasonCode: 'OPERATOR_INVALIDATED',
    afterStatus: 'invalidated',
  };
  assertAuditable(action);
  const { invalidateKey } = await import('../../audit/operator-actions.js');
  const receipt = await invalidateKey(ledger, key, { ...operatorOptions(opts), store: await ctx.store() });
  const eventId = storedOrExplain(receipt, `${key} was invalidated`);
  const rerun = target ? await rerunJob(key, target) : undefined;
  if (opts.json) {
    ctx.io.out(
      toJson({
        key,
        previousStatus: receipt.previousStatus,
        epoch: receipt.epoch,
        at: receipt.at,
        auditEventId: eventId,
        ...(rerun ? { rerun: { queue: target?.queue.name, ...rerun } } : {}),
      }),
    );
    return;
  }
  ctx.io.out(
    `invalidated ${key}: was ${receipt.previousStatus} (epoch ${record.epoch}), now invalidated at epoch ${receipt.epoch}; ` +
      'the next claim executes again',
  );
  if (target && rerun) ctx.io.out(describeRerun(target.queue.name, rerun));
  else if (record.jobId) {
    ctx.io.out(
      `its job ${record.jobId} is not re-run by this: while it exists, an enqueue of the same key is absorbed. ` +
        `\`invalidate ${key} --rerun --reason …\` retries it`,
    );
  }
  ctx.io.out(`audit event ${eventId} (actor ${actorLabel(opts.actor)})`);
}

/** The queue and job a re-run retries: the record's, or `--queue` and the job id of the key. */
async function rerunTarget(ctx: CliContext, record: LedgerRecord, queueOption: string | undefined) {
  const name = queueOption ?? record.queue;
  if (!name) {
    throw usageError(`the record of ${record.key} names no queue (it was claimed outside BullMQ): give --queue <name>`);
  }
  const { jobIdFor } = await import('../../operation/enqueue.js');
  return { queue: await ctx.queue(name), jobId: record.jobId ?? jobIdFor(record.key) };
}

async function rerunJob(key: string, target: Awaited<ReturnType<typeof rerunTarget>>) {
  const { rerun } = await import('../../operation/rerun.js');
  try {
    return await rerun(target.queue, key, { jobId: target.jobId });
  } catch (err) {
    throw new CliError(
      EXIT.failure,
      `${key} was invalidated, but its job ${target.jobId} in queue ${target.queue.name} could not be retried ` +
        `(${(err as Error).message}); run \`invalidate ${key} --rerun\` again, or retry the job from your dashboard`,
    );
  }
}

function describeRerun(queue: string, r: Awaited<ReturnType<typeof rerunJob>>): string {
  switch (r.kind) {
    case 'retried':
      return `re-run: job ${r.jobId} in queue ${queue} was ${r.from}, now waiting again (attempts reset); a worker runs the operation once more`;
    case 'pending':
      return `job ${r.jobId} in queue ${queue} is ${r.state}, not finished: nothing to retry; it claims the key when it is processed`;
    case 'gone':
      return `job ${r.jobId} is no longer in queue ${queue}: enqueue the operation again (the next enqueue() of this key is added and runs)`;
  }
}
