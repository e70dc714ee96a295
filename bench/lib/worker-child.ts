/**
 * One worker process of bench/wrapper.ts's many-workers run: withIdempotency over the bench
 * operation on one queue, its own ledger pool. Prints `ready` once connected, starts on a `go`
 * line on stdin, and on `stop` closes and prints `{"effects":n}` (how often the side effect ran).
 * Env: DATABASE_URL (with the run's application_name), REDIS_URL, BENCH_SCHEMA, BENCH_QUEUE,
 * BENCH_CONCURRENCY, BENCH_POOL, BENCH_KEY (hex, the sealing key).
 */
import { createInterface } from 'node:readline';
import { Worker } from 'bullmq';
import { PostgresLedger } from '../../src/ledger/postgres-ledger.js';
import { defineKeyring } from '../../src/sealing/keyring.js';
import { withIdempotency } from '../../src/worker/with-idempotency.js';
import { benchOperation } from './wrapper-operation.js';

const env = (name: string) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set`);
  return v;
};
const ledger = new PostgresLedger({
  connectionString: env('DATABASE_URL'),
  schema: env('BENCH_SCHEMA'),
  poolSize: Number(env('BENCH_POOL')),
});
const keyring = defineKeyring({ keys: [{ id: 'bench', secret: Buffer.from(env('BENCH_KEY'), 'hex') }] });
let effects = 0;
const redis = new URL(env('REDIS_URL'));
const worker = new Worker(
  env('BENCH_QUEUE'),
  withIdempotency(
    benchOperation,
    async (input) => {
      effects++;
      return { ok: true, id: input.id };
    },
    { ledger, keyring },
  ),
  {
    connection: { host: redis.hostname, port: Number(redis.port || 6379), maxRetriesPerRequest: null },
    concurrency: Number(env('BENCH_CONCURRENCY')),
    autorun: false,
  },
);
worker.on('failed', (_job, err) => {
  process.stderr.write(`worker child: a job failed: ${String(err)}\n`);
});
await worker.waitUntilReady();
await ledger.pool.query('select 1');
process.stdout.write('ready\n');
let running: Promise<void> | undefined;
for await (const line of createInterface({ input: process.stdin })) {
  if (line === 'go') running = worker.run();
  if (line === 'stop') break;
}
await worker.close();
await running;
await ledger.close();
process.stdout.write(`${JSON.stringify({ effects })}\n`);
