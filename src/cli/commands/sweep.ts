import { randomUUID } from 'node:crypto';
import { sweepLedger } from '../../../jobs/ledger-sweeper.js';
import { type AuditEvent, eventIdFor } from '../../audit/audit-event.js';
import type { CliContext } from '../context.js';
import { toJson } from '../format.js';
import { writeOperatorEvent } from './ledger.js';

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
  const event: AuditEvent = {
    eventId: eventIdFor('sweep', ledger.schema, `cli:${randomUUID()}`),
    actorType: 'user',
    actorId: opts.actor,
    action: 'idempotency.swept',
    resourceType: 'ledger',
    resourceId: ledger.schema,
    decision: 'allow',
    createdAt: new Date().toISOString(),
    phase: 'outcome',
    details: { deleted: r.deleted, batches: r.batches, via: 'cli' },
  };
  const eventId = await writeOperatorEvent(ctx, event, `${r.deleted} rows were swept`);
  const ms = Date.now() - started;
  if (opts.json) ctx.io.out(toJson({ ...r, ms, auditEventId: eventId }));
  else
    ctx.io.out(
      `swept ${r.deleted} expired row${r.deleted === 1 ? '' : 's'} in ${r.batches} batch${r.batches === 1 ? '' : 'es'} (${ms} ms) from schema ${ledger.schema}`,
    );
}
