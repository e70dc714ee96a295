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
 * Builds the runtime from one options object; claims and completes a key with a sealed result on
 * its ledger, claims it again and unseals the replay; then enqueues a charge, runs it in the
 * runtime's worker, unseals the job's result, sees a second enqueue absorbed and reads the task's
 * story (the audit writer runs in the process); imports a value of each subpath. Prints `ok …`,
 * `job …`, `story …` and `subpaths …`.
 */
export const ESM_CONSUMER = `
import { randomBytes } from 'node:crypto';
import { QueueEvents } from 'bullmq';
import pg from 'pg';
import { z } from 'zod';
import { createIdempotency, defineKeyring, defineOperation, type SealedResult, unseal } from 'bullmq-idempotency';
import { AuditStore } from 'bullmq-idempotency/audit';
import { boundedKey, type ClaimOptions, keyedFingerprint, PostgresLedger } from 'bullmq-idempotency/ledger';
import { createIdempotencyMetrics } from 'bullmq-idempotency/observability';
import { startOperationsProcess } from 'bullmq-idempotency/ops';
import { defineRedactionPolicy } from 'bullmq-idempotency/redaction';
import { startCommitCounter } from 'bullmq-idempotency/testing';

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
  queue: 'payments',
  input: z.object({ orderId: z.string(), amount: z.number().int(), traceId: z.string().optional() }),
  effect: (i) => ({ orderId: i.orderId, amount: i.amount }),
  resourceKey: (i) => \`order:\${i.orderId}\`,
  retention: '1h',
  lease: '10s',
  downstream: 'idempotent',
  result: z.object({ chargeId: z.string(), receipt: z.string() }),
  publicResult: ['chargeId'],
});

const idem = createIdempotency({
  postgres: connectionString,
  schema,
  redis: redisUrl,
  prefix: schema,
  keyring,
  audit: { writer: true },
  logger: false,
});
try {
  await idem.migrate();
  const ledger: PostgresLedger = idem.ledger;
  const claim: ClaimOptions = {
    key: { namespace: 'consumer/payments.charge', resourceKey: 'order:1', version: 'v1' },
    operation: 'payments.charge',
    fingerprint: keyedFingerprint(idem.keyring, 'payments.charge', { orderId: '1', amount: 1200 }),
    leaseMs: 10_000,
    retentionMs: 3_600_000,
    downstream: 'idempotent',
  };
  const first = await ledger.claim(claim);
  if (first.kind !== 'acquired') throw new Error(\`first claim: \${first.kind}\`);
  const result: Charge = { chargeId: 'ch_1', receipt: 'rcpt_secret' };
  await ledger.complete(claim.key, first.epoch, { chargeId: result.chargeId, $sealed: keyring.seal(result, { purpose: 'result', operation: claim.operation, key: boundedKey(claim.key) }) });
  const again = await ledger.claim(claim);
  if (again.kind !== 'completed') throw new Error(\`second claim: \${again.kind}\`);
  const replayed = unseal(again.result as SealedResult<Charge, 'chargeId'>, keyring);
  if (replayed.receipt !== result.receipt) throw new Error('the replay does not unseal to the result');
  console.log(\`ok \${again.kind} epoch \${again.epoch} \${replayed.chargeId}\`);

  const events = new QueueEvents(idem.queueName(chargeOrder), { connection: idem.connection, prefix: idem.prefix });
  try {
    await events.waitUntilReady();
    // Its type says what BullMQ keeps.
    const worker = idem.worker(chargeOrder, async (input, ctx) => ({ chargeId: \`ch_\${input.orderId}\`, receipt: ctx.idempotencyKey }));
    worker.on('completed', (_job, kept: SealedResult<Charge, 'chargeId'>) => void kept.chargeId);
    const job = await idem.enqueue(chargeOrder, { orderId: '2', amount: 500 }, { taskId: 'task-2' });
    const sealed = await (await idem.queue(chargeOrder).getJob(job.jobId))?.waitUntilFinished(events, 60_000);
    const charge = unseal(sealed as SealedResult<Charge, 'chargeId'>, keyring);
    const repeat = await idem.enqueue(chargeOrder, { orderId: '2', amount: 500 });
    console.log(\`job \${charge.chargeId} \${charge.receipt === job.idempotencyKey} added again: \${repeat.added} (\${repeat.state})\`);
    let story = await idem.timeline('task-2');
    for (const end = Date.now() + 30_000; !story.attempts.some((a) => a.end) && Date.now() < end; ) {
      await new Promise((r) => setTimeout(r, 100));
      story = await idem.timeline('task-2');
    }
    console.log(\`story \${story.attempts.map((a) => a.end).join(',')}\`);
  } finally {
    await events.close();
    await idem.queue(chargeOrder).obliterate({ force: true });
  }
  console.log(\`subpaths \${[AuditStore, PostgresLedger, createIdempotencyMetrics, startOperationsProcess, defineRedactionPolicy, startCommitCounter].map((v) => typeof v).join(' ')}\`);
} finally {
  await idem.close();
  const admin = new pg.Client({ connectionString });
  await admin.connect();
  await admin.query(\`drop schema if exists "\${schema}" cascade\`);
  await admin.end();
}
`;

/** The package's subpaths, as an application requires them. */
export const SUBPATHS = ['ledger', 'audit', 'redaction', 'observability', 'ops', 'testing'] as const;

/**
 * Prints a bounded key (from the ledger subpath), how many runtime values the root exports, then
 * for each subpath its name and how many values it exports.
 */
export const CJS_CONSUMER = `
const root = require('bullmq-idempotency');
const { boundedKey } = require('bullmq-idempotency/ledger');
console.log(boundedKey({ namespace: 'acme/payments.charge', resourceKey: 'order:42', version: 'v1' }));
console.log(typeof root.createIdempotency, Object.keys(root).length);
for (const sub of ${JSON.stringify(SUBPATHS)}) console.log(sub, Object.keys(require('bullmq-idempotency/' + sub)).length);
`;
