import { randomUUID } from 'node:crypto';
import { sweepEvent, sweepLedger } from '../../jobs/ledger-sweeper.js';
import type { CliContext } from '../context.js';
import { toJson } from '../format.js';
import { writeOperatorEvent } from '../operator-event-store.js';

export async function sweepCommand(
  ctx: CliContext,
  opts: { batchSize?: number; maxBatches?: number; actor: string; json?: boolean },
): Promise<void> {
  ctx.require('DATABASE_URL');
  const ledger = await ctx.ledger();
  const started = Date.now();
  const r = await sweepLedger(ledger, {
    ...(opts.batchSize ? { batchSize: opts.batchSize } : {}),
    ...(opts.maxBatches ? { maxBatches: opts.maxBatches } : {}),
  });
  const event = sweepEvent(
    ledger.schema,
    `cli:${randomUUID()}`,
    { deleted: r.deleted, batches: r.batches },
    { actorType: 'user', actorId: opts.actor },
  );
  event.details = { ...event.details, via: 'cli' };
  const eventId = await writeOperatorEvent(ctx, event, `${r.deleted} rows were swept`);
  const ms = Date.now() - started;
  if (opts.json) ctx.io.out(toJson({ ...r, ms, auditEventId: eventId }));
  else
    ctx.io.out(
      `swept ${r.deleted} expired row${r.deleted === 1 ? '' : 's'} in ${r.batches} batch${r.batches === 1 ? '' : 'es'} (${ms} ms) from schema ${ledger.schema}` +
        (r.pending > 0
          ? `; kept ${r.pending} whose audit events are not all stored yet (\`backfill\` stores them, the next sweep deletes them)`
          : ''),
    );
}
