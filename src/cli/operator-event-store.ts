/**
 * The audit event of an operator's action, written by the CLI straight to Postgres. Shared by the
 * commands that change the ledger (invalidate, resolve, sweep) and by `inspect --decrypt`: each
 * says the same thing when the event cannot be stored, so it is said once here.
 */
import type { AuditEvent } from '../audit/audit-event.js';
import type { CliContext } from './context.js';
import { CliError, EXIT } from './errors.js';

/** The operator and reason of a CLI action, as the library's operator actions take them. */
export const operatorOptions = (opts: { actor: string; reason: string }) =>
  ({ actor: opts.actor, reason: opts.reason, via: 'cli' }) as const;

/** The event id of an operator action whose event is stored; else a failure that says the backfill writes it. */
export function storedOrExplain(r: { event: AuditEvent; stored: boolean; storeError?: unknown }, done: string): string {
  if (r.stored) return r.event.eventId;
  const why = r.storeError instanceof Error ? r.storeError.message : String(r.storeError);
  throw new CliError(
    EXIT.failure,
    `${done}, but its audit event could not be written: ${why}. ` +
      'The ledger recorded the transition with its actor and reason: `bullmq-idempotency backfill` writes the same event',
  );
}

/** Writes an operator's event straight to Postgres; throws when it is not stored. */
export async function storeOperatorEvent(ctx: CliContext, event: AuditEvent): Promise<void> {
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
