/**
 * The demo's doomed worker: a separate process that takes the charge job of the demo's task,
 * records its decision, gets the downstream to commit, says so on stdout, and then hangs until
 * the demo kills it with SIGKILL — before it can record the completion. Argument: JSON
 * { databaseUrl, redisUrl, schema, prefix, queue, downstreamUrl }; the keyring comes in
 * `BQI_KEYRING`, never on the command line.
 */
import { PostgresLedger } from '../src/entries/ledger.js';
import { withIdempotency } from '../src/index.js';
import { openQueue, openWorker } from '../src/shared/queue-backend.js';
import { demoConnection } from './demo-data.js';
import {
  chargeOperation,
  chargeProcessor,
  DEMO_AUDIT_QUEUE,
  DEMO_WORKER_TIMING,
  demoAuditEmitter,
  demoKeyring,
} from './demo-operation.js';

const cfg = JSON.parse(process.argv[2] as string) as {
  databaseUrl: string;
  redisUrl: string;
  schema: string;
  prefix: string;
  queue: string;
  downstreamUrl: string;
};
// Never outlive the demo: its end (a signal, a crash) closes this pipe, even while starting up.
process.stdin.on('end', () => process.exit(0)).resume();
const connection = demoConnection(cfg.redisUrl, cfg.prefix);
const keyring = demoKeyring();
const ledger = new PostgresLedger({ connectionString: cfg.databaseUrl, schema: cfg.schema, poolSize: 2 });
const auditQueue = openQueue(DEMO_AUDIT_QUEUE, { connection, prefix: cfg.prefix });
const audit = demoAuditEmitter(auditQueue, ledger.pool, cfg.schema, keyring, 'demo-worker-2');
const hang = () => {
  process.stdout.write('committed\n');
  return new Promise<never>(() => {}); // the demo kills this process now
};
const worker = openWorker(
  cfg.queue,
  withIdempotency(chargeOperation('idempotent'), chargeProcessor(cfg.downstreamUrl, true, hang), {
    ledger,
    keyring,
    audit,
    worker: DEMO_WORKER_TIMING,
  }),
  { connection, prefix: cfg.prefix, ...DEMO_WORKER_TIMING },
);
worker.on('error', () => {});
await worker.waitUntilReady();
process.stdout.write('ready\n');
