/**
 * A worker whose processor awaits `ctx.audit()` and then hangs, for the durability test: it
 * prints `{"event":"audited"}` the moment the await returns, and the test SIGKILLs it at once.
 * Argument: JSON config. The emitter's batch interval is long (`maxDelayMs`), so a decision that
 * were only buffered would die with the process.
 */
import { writeSync } from 'node:fs';
import { Queue, Worker } from 'bullmq';
import pg from 'pg';
import { z } from 'zod';
import { AuditEmitter } from '../../src/audit/emitter.js';
import { PostgresLedger } from '../../src/ledger/postgres-ledger.js';
import { withIdempotency } from '../../src/worker/with-idempotency.js';
import { testOperation } from '../fixtures/operations.js';
import { testKeyring } from './keyring.js';

const cfg = JSON.parse(process.argv[2] as string) as {
  databaseUrl: string;
  redisUrl: string;
  schema: string;
  prefix: string;
  queue: string;
  auditQueue: string;
  maxDelayMs: number;
};
const connection = { url: cfg.redisUrl, maxRetriesPerRequest: null };
const pool = new pg.Pool({ connectionString: cfg.databaseUrl, max: 2 });
const ledger = new PostgresLedger({ connectionString: cfg.databaseUrl, schema: cfg.schema });
const emitter = new AuditEmitter({
  queue: new Queue(cfg.auditQueue, { connection, prefix: cfg.prefix }),
  pool,
  schema: cfg.schema,
  redact: (e) => e,
  maxDelayMs: cfg.maxDelayMs,
});
const input = z.object({ order: z.string() });
const op = testOperation({
  name: 'tools.delete',
  input,
  effect: (i) => i,
  resourceKey: (i) => `order:${i.order}`,
  lease: '10s',
});
const worker = new Worker(
  cfg.queue,
  withIdempotency(
    op,
    async (_i, ctx) => {
      await ctx.audit({ action: 'tool.delete_bucket', decision: 'deny', reasonCode: 'POLICY_PROTECTED_RESOURCE' });
      writeSync(1, `${JSON.stringify({ event: 'audited' })}\n`);
      await new Promise(() => {}); // the test kills the process here
      return {};
    },
    { ledger, keyring: testKeyring, audit: emitter },
  ),
  { connection, prefix: cfg.prefix, lockDuration: 30_000 },
);
worker.on('ready', () => writeSync(1, `${JSON.stringify({ event: 'ready' })}\n`));
// Never outlives a test that failed before killing it.
setTimeout(() => process.exit(1), 60_000).unref();
