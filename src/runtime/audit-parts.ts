import { hostname } from 'node:os';
import type { ConnectionOptions, Queue, Worker } from 'bullmq';
import type pg from 'pg';
import { AuditEmitter } from '../audit/emitter.js';
import { auditRedactor } from '../audit/redact-event.js';
import { createAuditWriter } from '../jobs/audit-writer.js';
import type { ResolvedOptions, RuntimeAuditSettings } from './resolve-options.js';

/**
 * The audit trail's parts a runtime builds from its resolved options: the emitter its workers and
 * enqueues record through, and the writer when the process writes the trail too. Apart from the
 * runtime so both are keyed and redacted from the same settings in one place: a setting of the
 * trail added to the options reaches the emitter and the writer here.
 */

/** Who the runtime's events name as their actor: its `owner`, else this host and process. */
export function runtimeActorId(owner: string | undefined): string {
  return owner ? `worker:${owner}` : `worker:${hostname()}:${process.pid}`;
}

/** The writer of the trail in this process (`audit: { writer: true }`), or undefined. */
export function openRuntimeWriter(
  o: ResolvedOptions,
  connection: ConnectionOptions,
  pool: pg.Pool,
): Worker | undefined {
  if (!o.writer || !o.audit) return undefined;
  return createAuditWriter({
    connection,
    pool,
    schema: o.schema,
    prefix: o.prefix,
    queueName: o.audit.queue,
    redactionPolicy: o.auditPolicy,
    logger: o.logger,
    ...(o.writer.concurrency === undefined ? {} : { concurrency: o.writer.concurrency }),
    ...o.prepared,
  });
}

/** The emitter of the runtime's events on the audit queue, redacted with the trail's policy. */
export function openRuntimeEmitter(
  o: ResolvedOptions,
  audit: RuntimeAuditSettings,
  queue: Queue,
  pool: pg.Pool,
): AuditEmitter {
  return new AuditEmitter({
    queue,
    pool,
    schema: o.schema,
    redact: auditRedactor(o.auditPolicy),
    redactionPolicy: o.auditPolicy,
    logger: o.logger,
    actorId: runtimeActorId(o.owner),
    ...(audit.maxBatch === undefined ? {} : { maxBatch: audit.maxBatch }),
    ...(audit.maxDelayMs === undefined ? {} : { maxDelayMs: audit.maxDelayMs }),
  });
}
