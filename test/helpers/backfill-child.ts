/** A backfill worker in its own process, for the kill-and-resume test. Argument: JSON config. */
import { Queue } from 'bullmq';
import pg from 'pg';
import { createBackfillWorker } from '../../src/jobs/audit-backfill.js';

const cfg = JSON.parse(process.argv[2] as string) as {
  databaseUrl: string;
  redisUrl: string;
  schema: string;
  prefix: string;
  auditQueue: string;
  backfillQueue: string;
};
const connection = { url: cfg.redisUrl, maxRetriesPerRequest: null };
const pool = new pg.Pool({ connectionString: cfg.databaseUrl, max: 3 });
const auditQueue = new Queue(cfg.auditQueue, { connection, prefix: cfg.prefix });
const worker = createBackfillWorker({
  connection,
  prefix: cfg.prefix,
  queueName: cfg.backfillQueue,
  pool,
  schema: cfg.schema,
  auditQueue,
  pageSize: 20,
  maxRowsPerSecond: 200,
  workerOptions: { lockDuration: 1000, stalledInterval: 500 },
});
worker.on('progress', (_job, p) => process.stdout.write(`${JSON.stringify(p)}\n`));
process.stdin.on('end', () => process.exit(0)).resume();
