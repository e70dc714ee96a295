/**
 * A process that holds a ledger pool, for the test of dropped connections: it opens a few
 * connections, prints `{"msg":"ready","connections":n}`, then waits until the pool has lost all of
 * them (the test terminates them), claims one more key, prints `{"msg":"claimed",…}` and exits 0.
 * Any crash shows as another exit code. The ledger's warnings are printed as JSON lines too.
 *
 * Usage: node --import tsx test/helpers/pool-child.ts (DATABASE_URL, BQI_SCHEMA).
 */
import { randomBytes } from 'node:crypto';
import { writeSync } from 'node:fs';
import { PostgresLedger } from '../../src/ledger/postgres-ledger.js';

const CONNECTIONS = 4;
const WAIT_MS = 30_000;

const print = (line: object) => writeSync(1, `${JSON.stringify(line)}\n`);
const logger = { warn: (obj: object, msg?: string) => print({ level: 'warn', ...obj, msg }) };

function claim(ledger: PostgresLedger, id: string) {
  return ledger.claim({
    key: { namespace: 'test/pool-child', resourceKey: id, version: 'v1' },
    operation: 'pool.child',
    fingerprint: 'fp',
    leaseMs: 10_000,
    retentionMs: 60_000,
    downstream: 'idempotent',
  });
}

const ledger = new PostgresLedger({
  connectionString: process.env.DATABASE_URL as string,
  schema: process.env.BQI_SCHEMA as string,
  batching: false,
  poolSize: CONNECTIONS,
  logger,
});
const run = randomBytes(4).toString('hex');
try {
  // Concurrent claims, so the pool opens several connections.
  await Promise.all(Array.from({ length: CONNECTIONS * 2 }, (_, i) => claim(ledger, `${run}-${i}`)));
  const connections = ledger.pool.totalCount;
  print({ msg: 'ready', connections });
  const deadline = Date.now() + WAIT_MS;
  while (ledger.metrics.poolErrors < connections) {
    if (Date.now() > deadline) throw new Error(`lost ${ledger.metrics.poolErrors} of ${connections} connections`);
    await new Promise((r) => setTimeout(r, 25));
  }
  const after = await claim(ledger, `${run}-after`);
  print({ msg: 'claimed', kind: after.kind, poolErrors: ledger.metrics.poolErrors });
} finally {
  await ledger.close();
}
