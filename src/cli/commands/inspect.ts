/**
 * `inspect`: a key's ledger record (found by its key, or by the job that carries it), and with
 * `--decrypt` its sealed values opened after the opening is audited. The only ledger command that
 * reads without changing anything, so it loads nothing of the operator actions.
 */
import { boundedKey, idempotencyKeySchema } from '../../keys/idempotency-key.js';
import type { LedgerRecord } from '../../ledger/types.js';
import { ENVELOPE_FIELD } from '../../operation/envelope.js';
import type { Keyring } from '../../sealing/keyring.js';
import { actorLabel } from '../actor.js';
import type { CliContext } from '../context.js';
import { CliError, EXIT, notFound, usageError } from '../errors.js';
import { table, toJson } from '../format.js';
import { missingKey, normalizeKey } from '../keys.js';
import { storeOperatorEvent } from '../operator-event-store.js';
import { renderRecord } from '../render-record.js';

/** The bounded key a job carries in its data envelope. */
async function keyOfJob(ctx: CliContext, queueName: string, jobId: string) {
  ctx.require('DATABASE_URL', 'REDIS_URL');
  const queue = await ctx.queue(queueName);
  const job = await queue.getJob(jobId);
  if (!job) {
    // The id is not echoed: an id that names no job may be anything pasted in its place.
    throw notFound(`no job with the id given (not echoed) in queue ${queueName} (prefix ${ctx.config.prefix})`);
  }
  const meta = (job.data as Record<string, unknown> | undefined)?.[ENVELOPE_FIELD] as { key?: unknown } | undefined;
  const parsed = idempotencyKeySchema.safeParse(meta?.key);
  if (!parsed.success) {
    throw notFound(`job ${jobId} in queue ${queueName} carries no idempotency key (data.${ENVELOPE_FIELD}.key)`);
  }
  return {
    key: boundedKey(parsed.data),
    job: {
      queue: queueName,
      id: jobId,
      name: job.name,
      state: await job.getState(),
      attemptsMade: job.attemptsMade,
      attemptsStarted: job.attemptsStarted,
      stalledCounter: job.stalledCounter,
      ...(job.failedReason ? { failedReason: job.failedReason } : {}),
    },
  };
}

export type InspectCommandOptions = {
  job?: string;
  json?: boolean;
  /** Open the sealed result and error text (needs BQI_KEYRING and `reason`; audited first). */
  decrypt?: boolean;
  reason?: string;
  actor: string;
};

export async function inspectCommand(ctx: CliContext, keyOrJobId: string, opts: InspectCommandOptions): Promise<void> {
  if (!opts.decrypt && opts.reason !== undefined) throw usageError('--reason goes with --decrypt only');
  const keyring = opts.decrypt ? decryptKeyring(ctx, opts) : undefined;
  ctx.require('DATABASE_URL');
  let key = opts.job === undefined ? normalizeKey(keyOrJobId) : keyOrJobId;
  let job: Awaited<ReturnType<typeof keyOfJob>>['job'] | undefined;
  if (opts.job !== undefined) ({ key, job } = await keyOfJob(ctx, opts.job, keyOrJobId));
  const record = await (await ctx.ledger()).get(key);
  // Opened in memory and audited before anything is printed: a failure prints nothing else.
  const opening = record && keyring ? await openAudited(ctx, record, keyring, opts) : undefined;
  const opened = opening?.opened ?? {};
  if (opts.json) {
    const extra = opening ? { opened, auditEventId: opening.auditEventId } : {};
    if (job || record) ctx.io.out(toJson(job ? { job, record, ...extra } : { ...record, ...extra }));
  } else {
    if (job) {
      ctx.io.out(
        `${table([
          ['job', `${job.queue} / ${job.id} (${job.name})`],
          ['job state', job.state],
          ['attempts', `made ${job.attemptsMade}, started ${job.attemptsStarted ?? 0}, stalled ${job.stalledCounter}`],
          ...(job.failedReason ? [['failed reason', job.failedReason] as [string, string]] : []),
        ])}\n`,
      );
    }
    if (record) ctx.io.out(renderRecord(record, opened));
    if (opening) {
      ctx.io.out(
        opening.auditEventId
          ? `\nopened ${opening.parts.join(' and ')}; audit event ${opening.auditEventId} (actor ${actorLabel(opts.actor)})`
          : '\nnothing sealed to open',
      );
    }
  }
  if (!record) {
    if (job) throw notFound(`no ledger record for key ${key}: the job has not claimed it yet, or it expired`);
    throw missingKey(key);
  }
}

/** The keyring `--decrypt` opens with; a usage or configuration error before anything is read. */
function decryptKeyring(ctx: CliContext, opts: InspectCommandOptions): Keyring {
  if (opts.reason === undefined) {
    throw usageError('--decrypt needs --reason <text>: why the sealed values are opened (kept in the audit event)');
  }
  return ctx.keyring('--decrypt: it holds the keys that open sealed values');
}

/**
 * Opens the sealed parts of `record` and writes the `operator.decrypt` event before returning
 * them. Fails closed: when the event cannot be written, the values are not returned.
 */
async function openAudited(ctx: CliContext, record: LedgerRecord, keyring: Keyring, opts: InspectCommandOptions) {
  const { openRecord } = await import('../open-record.js');
  const { assertValidEvent, decryptEvent } = await import('../operator-audit.js');
  const opening = openRecord(record, keyring);
  if (opening.parts.length === 0) return { ...opening, auditEventId: undefined };
  const event = decryptEvent({
    record,
    actorId: opts.actor,
    reason: opts.reason as string,
    opened: opening.parts,
    keyIds: opening.keyIds,
  });
  assertValidEvent(event);
  try {
    await storeOperatorEvent(ctx, event);
  } catch (err) {
    throw new CliError(
      EXIT.failure,
      `the audit event of this opening could not be written (${(err as Error).message}); nothing was shown`,
    );
  }
  return { ...opening, auditEventId: event.eventId };
}
