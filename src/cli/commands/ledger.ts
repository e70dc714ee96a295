import type { AuditEvent } from '../../audit/audit-event.js';
import { IllegalTransitionError, InvalidInputError } from '../../errors/errors.js';
import { boundedKey, idempotencyKeySchema } from '../../keys/idempotency-key.js';
import type { LedgerRecord } from '../../ledger/types.js';
import { ENVELOPE_FIELD } from '../../operation/envelope.js';
import { resolvedResult } from '../../operation/resolved-result.js';
import type { Keyring } from '../../sealing/keyring.js';
import { actorLabel } from '../actor.js';
import type { CliContext } from '../context.js';
import { CliError, EXIT, notFound, usageError } from '../errors.js';
import { table, toJson } from '../format.js';
import { normalizeKey } from '../keys.js';
import type { OperatorAction } from '../operator-audit.js';
import { renderRecord } from '../render-record.js';

function missingKey(key: string): CliError {
  const hint = key.startsWith('idem_')
    ? ' (this looks like a BullMQ job id: use `inspect --job <queue> <id>`)'
    : ' (give the bounded key, namespace:resourceKey:version with percent-encoded parts, as ctx.idempotencyKey shows it)';
  return notFound(`no ledger record for key ${key}${hint}`);
}

async function getRecord(ctx: CliContext, key: string): Promise<LedgerRecord> {
  const record = await (await ctx.ledger()).get(key);
  if (!record) throw missingKey(key);
  return record;
}

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
  const { jobIdFor } = await import('../../producer/enqueue.js');
  return { queue: await ctx.queue(name), jobId: record.jobId ?? jobIdFor(record.key) };
}

async function rerunJob(key: string, target: Awaited<ReturnType<typeof rerunTarget>>) {
  const { rerun } = await import('../../producer/rerun.js');
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

export type ResolveCommandOptions = {
  committed?: boolean;
  notCommitted?: boolean;
  /** The result as JSON text; parsed here, so a parse error never quotes it. */
  result?: string;
  /** Top-level fields of the result kept in clear beside `$sealed`, comma-separated: the operation's `publicResult`. */
  public?: string;
  reason: string;
  actor: string;
  json?: boolean;
};

export async function resolveCommand(ctx: CliContext, keyArg: string, opts: ResolveCommandOptions): Promise<void> {
  if (!opts.committed && !opts.notCommitted) {
    throw new CliError(EXIT.usage, 'say what happened: --committed --result <json>, or --not-committed');
  }
  if (opts.committed && opts.result === undefined) {
    throw new CliError(EXIT.usage, '--committed needs --result <json>: the result a replay will return');
  }
  if (opts.notCommitted && opts.result !== undefined) {
    throw new CliError(EXIT.usage, '--result goes with --committed only');
  }
  if (opts.public !== undefined && !opts.committed) throw usageError('--public goes with --committed only');
  const value = opts.result === undefined ? undefined : parseResult(opts.result);
  const publicFields = opts.public === undefined ? [] : parsePublic(opts.public);
  // The result is recorded sealed, as the wrapper records one: without the keyring, nothing is.
  const keyring = opts.committed
    ? ctx.keyring('resolve --committed: the result is sealed with its current key before it is recorded')
    : undefined;
  const key = normalizeKey(keyArg);
  ctx.require('DATABASE_URL');
  const { assertAuditable } = await import('../operator-audit.js');
  const ledger = await ctx.ledger();
  const record = await getRecord(ctx, key);
  const committed = Boolean(opts.committed);
  if (record.status !== 'unknown') {
    throw new CliError(
      EXIT.illegalTransition,
      `cannot resolve ${key}: it is ${record.status} (epoch ${record.epoch}), not unknown. ` +
        'resolve only settles an unknown outcome; `invalidate` forces the next attempt to execute again',
    );
  }
  // Sealed as the operation's completion seals it when --public names its publicResult fields.
  const result = keyring ? sealFound(record, value, keyring, publicFields) : undefined;
  const action: Omit<OperatorAction, 'receipt'> = {
    type: 'resolved',
    record,
    actorId: opts.actor,
    reason: opts.reason,
    reasonCode: committed ? 'OPERATOR_RESOLVED_COMMITTED' : 'OPERATOR_RESOLVED_NOT_COMMITTED',
    afterStatus: committed ? 'completed' : 'released',
  };
  assertAuditable(action);
  const { resolveKey } = await import('../../audit/operator-actions.js');
  let receipt: Awaited<ReturnType<typeof resolveKey>>;
  try {
    receipt = await resolveKey(ledger, key, result ? { committed: true, result } : { committed: false }, {
      ...operatorOptions(opts),
      store: await ctx.store(),
    });
  } catch (err) {
    if (err instanceof IllegalTransitionError && err.details.from !== null) {
      // Someone else settled it between our read and the write.
      throw new CliError(EXIT.illegalTransition, `cannot resolve ${key}: it is now ${err.details.from}, not unknown`);
    }
    throw err;
  }
  const eventId = storedOrExplain(receipt, `${key} was resolved`);
  if (opts.json) {
    ctx.io.out(
      toJson({
        key,
        committed,
        ...(committed ? { public: publicFields } : {}),
        status: action.afterStatus,
        epoch: receipt.epoch,
        at: receipt.at,
        auditEventId: eventId,
      }),
    );
  } else {
    ctx.io.out(
      committed
        ? `resolved ${key} as committed: completed at epoch ${receipt.epoch}; replays return the given result`
        : `resolved ${key} as not committed: released at epoch ${receipt.epoch}; the next claim executes again`,
    );
    if (committed) {
      ctx.io.out(
        publicFields.length > 0
          ? `in clear beside the sealed copy: ${publicFields.join(', ')}`
          : "no field in clear: replays hold the result only sealed (--public names the operation's publicResult fields)",
      );
    }
    ctx.io.out(`audit event ${eventId} (actor ${actorLabel(opts.actor)})`);
  }
}

/** `--public a,b`: distinct, non-empty field names. */
function parsePublic(text: string): string[] {
  const fields = text.split(',').map((f) => f.trim());
  if (fields.some((f) => f === '') || new Set(fields).size !== fields.length) {
    throw usageError(
      '--public takes distinct top-level field names of --result, comma-separated: --public chargeId,status',
    );
  }
  return fields;
}

/** The found result sealed for the record's row; public fields that are not the result's are refused, never echoed. */
function sealFound(record: LedgerRecord, value: unknown, keyring: Keyring, publicFields: string[]): unknown {
  try {
    return resolvedResult(record, value, keyring, { publicFields });
  } catch (err) {
    if (!(err instanceof InvalidInputError)) throw err;
    const wrong = err.details.issues.length;
    throw usageError(
      `--public names ${wrong} field(s) that are not top-level fields of --result with a value (a JSON object): nothing was recorded`,
    );
  }
}

/** The operator's result: JSON, which the error never quotes (it may be what the key must keep). */
function parseResult(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    throw usageError(`--result is not JSON (${text.length} characters); quote strings: '"done"'`);
  }
}

/** The operator and reason of a CLI action, as the library's operator actions take them. */
const operatorOptions = (opts: { actor: string; reason: string }) =>
  ({ actor: opts.actor, reason: opts.reason, via: 'cli' }) as const;

/** The event id of an operator action whose event is stored; else a failure that says the backfill writes it. */
function storedOrExplain(r: { event: AuditEvent; stored: boolean; storeError?: unknown }, done: string): string {
  if (r.stored) return r.event.eventId;
  const why = r.storeError instanceof Error ? r.storeError.message : String(r.storeError);
  throw new CliError(
    EXIT.failure,
    `${done}, but its audit event could not be written: ${why}. ` +
      'The ledger recorded the transition with its actor and reason: `bullmq-idempotency backfill` writes the same event',
  );
}

/** Writes an operator's event straight to Postgres; throws when it is not stored. */
async function storeOperatorEvent(ctx: CliContext, event: AuditEvent): Promise<void> {
  const r = await (await ctx.store()).writeBatch([event]);
  if (r.deadLettered > 0) throw new Error('the event was refused and dead-lettered');
}

/** Writes an operator's event straight to Postgres; the ledger change has already happened. */
export async function writeOperatorEvent(ctx: CliContext, event: AuditEvent, done: string): Promise<string> {
  try {
    await storeOperatorEvent(ctx, event);
    return event.eventId;
  } catch (err) {
    throw new CliError(
      EXIT.failure,
      `${done}, but its audit event could not be written: ${(err as Error).message}. ` +
        '`bullmq-idempotency backfill` derives it from the ledger (without actor and reason)',
    );
  }
}
