/**
 * The files of a fresh application that installs the packed tarball (see package.test.ts): an
 * ESM consumer type-checked under the strictest options and run against the services, and a
 * CommonJS one that `require`s the package.
 */

export const CONSUMER_PACKAGE_JSON = JSON.stringify({ name: 'bqi-consumer', private: true, type: 'module' }, null, 2);

/**
 * An application with the conventions' compiler options; `skipLibCheck` off, so the package's own
 * declarations are checked under them too.
 */
export const CONSUMER_TSCONFIG = JSON.stringify(
  {
    compilerOptions: {
      target: 'ES2022',
      module: 'NodeNext',
      moduleResolution: 'NodeNext',
      lib: ['ES2024'],
      types: ['node'],
      strict: true,
      exactOptionalPropertyTypes: true,
      noUncheckedIndexedAccess: true,
      verbatimModuleSyntax: true,
      skipLibCheck: false,
    },
    files: ['consumer.ts'],
  },
  null,
  2,
);

/**
 * argv: the schema to use (created by `migrate`, dropped at the end), also the BullMQ prefix.
 * Claims and completes a key with a sealed result, claims it again and unseals the replay; then,
 * through BullMQ on REDIS_URL, enqueues a charge, runs it in a wrapped Worker, unseals the job's
 * result and sees a second enqueue absorbed; prints `ok …` and `job …`.
 */
export const ESM_CONSUMER = `
import { randomBytes } from 'node:crypto';
import { Queue, QueueEvents, Worker } from 'bullmq';
import pg from 'pg';
import { z } from 'zod';
import {
  type ClaimOptions,
  defineKeyring,
  defineOperation,
  fingerprint,
  migrate,
  PostgresLedger,
  type SealedResult,
  unseal,
  withIdempotency,
} from 'bullmq-idempotency';

const connectionString = process.env.DATABASE_URL;
const redisUrl = process.env.REDIS_URL;
const schema = process.argv[2];
if (!connectionString || !redisUrl || !schema) throw new Error('usage: DATABASE_URL=… REDIS_URL=… node consumer.js <schema>');

type Charge = { chargeId: string; receipt: string };
const keyring = defineKeyring({ keys: [{ id: 'k1', secret: \`base64:\${randomBytes(32).toString('base64')}\` }] });
const chargeOrder = defineOperation({
  name: 'payments.charge',
  namespace: 'consumer/payments.charge',
  version: 'v1',
  input: z.object({ orderId: z.string(), amount: z.number().int(), traceId: z.string().optional() }),
  effect: (i) => ({ orderId: i.orderId, amount: i.amount }),
  resourceKey: (i) => \`order:\${i.orderId}\`,
  retention: '1h',
  lease: '10s',
  downstream: 'idempotent',
  result: z.object({ chargeId: z.string(), receipt: z.string() }),
  publicResult: ['chargeId'],
});

await migrate({ connectionString, schema });
const ledger = new PostgresLedger({ connectionString, schema });
try {
  // What a Worker would be given; its type says what BullMQ keeps.
  const processor = withIdempotency(
    chargeOrder,
    async (input, ctx) => ({ chargeId: \`ch_\${input.orderId}\`, receipt: ctx.idempotencyKey }),
    { ledger, keyring },
  );
  const returned: Promise<SealedResult<Charge, 'chargeId'>> | undefined = undefined as
    | ReturnType<typeof processor>
    | undefined;
  void returned;

  const claim: ClaimOptions = {
    key: { namespace: 'consumer/payments.charge', resourceKey: 'order:1', version: 'v1' },
    operation: 'payments.charge',
    fingerprint: fingerprint('payments.charge', { orderId: '1', amount: 1200 }),
    leaseMs: 10_000,
    retentionMs: 3_600_000,
    downstream: 'idempotent',
  };
  const first = await ledger.claim(claim);
  if (first.kind !== 'acquired') throw new Error(\`first claim: \${first.kind}\`);
  const result: Charge = { chargeId: 'ch_1', receipt: 'rcpt_secret' };
  await ledger.complete(claim.key, first.epoch, { chargeId: result.chargeId, $sealed: keyring.seal(result, 'result') });
  const again = await ledger.claim(claim);
  if (again.kind !== 'completed') throw new Error(\`second claim: \${again.kind}\`);
  const replayed = unseal(again.result as SealedResult<Charge, 'chargeId'>, keyring);
  if (replayed.receipt !== result.receipt) throw new Error('the replay does not unseal to the result');
  console.log(\`ok \${again.kind} epoch \${again.epoch} \${replayed.chargeId}\`);

  const connection = { url: redisUrl };
  const queue = new Queue('payments', { connection, prefix: schema });
  const events = new QueueEvents('payments', { connection, prefix: schema });
  const worker = new Worker('payments', processor, { connection, prefix: schema });
  try {
    const job = await chargeOrder.enqueue(queue, { orderId: '2', amount: 500 });
    const sealed = await (await queue.getJob(job.jobId))?.waitUntilFinished(events, 60_000);
    const charge = unseal(sealed as SealedResult<Charge, 'chargeId'>, keyring);
    const repeat = await chargeOrder.enqueue(queue, { orderId: '2', amount: 500 });
    console.log(\`job \${charge.chargeId} \${charge.receipt === job.idempotencyKey} added again: \${repeat.added} (\${repeat.state})\`);
  } finally {
    await worker.close();
    await queue.obliterate({ force: true });
    await Promise.all([queue.close(), events.close()]);
  }
} finally {
  await ledger.close();
  const admin = new pg.Client({ connectionString });
  await admin.connect();
  await admin.query(\`drop schema if exists "\${schema}" cascade\`);
  await admin.end();
}
`;

/** Prints a bounded key, then whether the testing subpath loaded. */
export const CJS_CONSUMER = `
const { boundedKey } = require('bullmq-idempotency');
const testing = require('bullmq-idempotency/testing');
console.log(boundedKey({ namespace: 'acme/payments.charge', resourceKey: 'order:42', version: 'v1' }));
console.log(typeof testing.startDownstream);
`;
