/**
 * The demo's doomed worker: a separate process that takes a charge job, gets the downstream to
 * commit, says so on stdout, and then hangs until the demo kills it with SIGKILL — before it can
 * record the completion. Argument: JSON { databaseUrl, redisUrl, schema, prefix, queue, downstreamUrl };
 * the keyring comes in `BQI_KEYRING`, never on the command line.
 */
import { Worker } from 'bullmq';
import { PostgresLedger, withIdempotency } from '../src/index.js';
import { postEffect } from '../src/testing/downstream-stub.js';
import { chargeOperation, DEMO_WORKER_TIMING, demoKeyring } from './demo-operation.js';

const cfg = JSON.parse(process.argv[2] as string) as {
  databaseUrl: string;
  redisUrl: string;
  schema: string;
  prefix: string;
  queue: string;
  downstreamUrl: string;
};
const ledger = new PostgresLedger({ connectionString: cfg.databaseUrl, schema: cfg.schema, poolSize: 2 });
const worker = new Worker(
  cfg.queue,
  withIdempotency(
    chargeOperation('idempotent'),
    async (input, ctx) => {
      await postEffect(cfg.downstreamUrl, input, ctx.idempotencyKey);
      process.stdout.write('committed\n');
      return new Promise<never>(() => {}); // hang: the demo kills this process now
    },
    { ledger, keyring: demoKeyring(), worker: DEMO_WORKER_TIMING },
  ),
  { connection: { url: cfg.redisUrl }, prefix: cfg.prefix, ...DEMO_WORKER_TIMING },
);
worker.on('error', () => {});
process.stdin.on('end', () => process.exit(0)).resume(); // never outlive the demo
