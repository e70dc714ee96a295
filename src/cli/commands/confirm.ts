import { answerConfirmation, listConfirmations } from '../../confirm/answer.js';
import type { Confirmation } from '../../confirm/types.js';
import { confirmationView } from '../../confirm/view.js';
import { ERROR_CODES, isIdempotencyError } from '../../errors/idempotency-error.js';
import { actorLabel } from '../actor.js';
import type { CliContext } from '../context.js';
import { CliError, EXIT } from '../errors.js';
import { formatDuration, toJson } from '../format.js';

export type ConfirmationsListOptions = { pending?: boolean; limit: number; after?: string; json?: boolean };

/** `confirmations list`: the requests (or only the pending ones), in id order; details stay sealed. */
export async function confirmationsListCommand(ctx: CliContext, opts: ConfirmationsListOptions): Promise<void> {
  ctx.require('DATABASE_URL');
  const rows = await listConfirmations({
    pool: await ctx.pool(),
    schema: ctx.schema,
    pending: opts.pending === true,
    limit: opts.limit + 1,
    ...(opts.after !== undefined ? { after: opts.after } : {}),
  });
  const policy = await ctx.auditPolicy();
  // Shown as the audit trail tells the actor: a request answered before actors were stored so, too.
  const page = rows.slice(0, opts.limit).map((c) => ({ ...c, answeredBy: confirmationView(c, policy).answeredBy }));
  const next = rows.length > opts.limit ? page.at(-1)?.id : undefined;
  if (opts.json) {
    ctx.io.out(toJson({ confirmations: page.map((c) => confirmationView(c, policy)), ...(next ? { next } : {}) }));
    return;
  }
  if (page.length === 0) {
    ctx.io.out(opts.pending ? 'no pending confirmations' : 'no confirmations');
    return;
  }
  ctx.io.out(page.map(render).join('\n'));
  if (next) ctx.io.out(`… more: add --after ${next}`);
}

function render(c: Confirmation): string {
  const now = c.readAt.getTime();
  const state =
    c.status === 'pending'
      ? c.overdue
        ? `pending, timed out ${formatDuration(now - c.expiresAt.getTime())} ago (then ${c.onTimeout})`
        : `pending, times out in ${formatDuration(c.expiresAt.getTime() - now)} (then ${c.onTimeout})`
      : `${c.status.replace('_', ' ')} by ${c.answeredByType ?? '?'}:${c.answeredBy ?? '?'} at ${c.answeredAt?.toISOString() ?? '?'}`;
  const lines = [
    `${c.id}  ${c.operation} / ${c.name}  ${state}`,
    `  asked:     ${c.requestedAt.toISOString()} (${formatDuration(now - c.requestedAt.getTime())} ago)${
      c.jobId ? ` by job ${c.queue ?? '?'}/${c.jobId}` : ''
    }${c.taskId ? `, task ${c.taskId}` : ''}`,
    `  key:       ${c.operationKey}`,
    `  reason:    ${c.reason}`,
  ];
  if (c.details) lines.push(`  details:   sealed (${c.details.length} characters)`);
  if (c.comment) lines.push(`  comment:   ${c.comment}`);
  return lines.join('\n');
}

export type ConfirmCommandOptions = {
  approve?: boolean;
  deny?: boolean;
  reason: string;
  actor: string;
  json?: boolean;
};

/** `confirm <id> --approve|--deny`: records the answer once, audits it, wakes the waiting jobs. */
export async function confirmCommand(ctx: CliContext, id: string, opts: ConfirmCommandOptions): Promise<void> {
  if (opts.approve === opts.deny) throw new CliError(EXIT.usage, 'give exactly one of --approve and --deny');
  ctx.require('DATABASE_URL');
  const pool = await ctx.pool();
  // Waking the parked jobs needs Redis; without REDIS_URL they find the answer at their next re-check.
  const queue = ctx.config.redisUrl ? (name: string) => ctx.queue(name) : undefined;
  const policy = await ctx.auditPolicy();
  let r: Awaited<ReturnType<typeof answerConfirmation>>;
  try {
    // --actor is the caller's say: whoever can write to the database can answer as anyone.
    r = await answerConfirmation({
      pool,
      schema: ctx.schema,
      id,
      approve: opts.approve === true,
      actor: opts.actor,
      policy,
      comment: opts.reason,
      auditStore: await ctx.store(),
      via: 'cli',
      ...(queue ? { queue } : {}),
    });
  } catch (err) {
    throw asCliError(err) ?? err;
  }
  const c = r.confirmation;
  if (opts.json) {
    ctx.io.out(
      toJson({
        confirmation: confirmationView(c, policy),
        recorded: r.recorded,
        auditEventId: r.auditEventId,
        woken: r.woken,
      }),
    );
    return;
  }
  const what = c.status === 'approved' ? 'approved' : 'denied';
  ctx.io.out(
    r.recorded
      ? `${c.id} ${what} (actor ${actorLabel(opts.actor)}); audit event ${r.auditEventId}; ${r.woken} waiting job${r.woken === 1 ? '' : 's'} woken${queue ? '' : ' (REDIS_URL unset: jobs see it at their next re-check)'}`
      : `${c.id} was already ${what} by ${c.answeredBy ?? '?'} at ${c.answeredAt?.toISOString() ?? '?'}: nothing changed`,
  );
}

function asCliError(err: unknown): CliError | undefined {
  if (!isIdempotencyError(err)) return undefined;
  switch (err.code) {
    case ERROR_CODES.confirmationNotFound:
      return new CliError(EXIT.notFound, `${err.message} (ids look like cf-12: see \`confirmations list\`)`, err.code);
    case ERROR_CODES.confirmationAnswered:
    case ERROR_CODES.confirmationTimedOut:
      return new CliError(EXIT.illegalTransition, err.message, err.code);
    case ERROR_CODES.invalidInput:
      return new CliError(EXIT.usage, err.message, err.code);
    default:
      return undefined;
  }
}
