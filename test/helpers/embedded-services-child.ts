/**
 * The demo's choice of services with nothing to find (run in a network namespace of its own):
 * `services({ embedded: true })`, then a short run of the runtime on what it chose — one
 * operation enqueued twice and copied three times, one commit — and the services stopped.
 * Prints one JSON line: the URLs' schemes, the commits, and whether the data folder is gone.
 */
import { existsSync } from 'node:fs';
import { services } from '../../scripts/services.js';
import { createIdempotency } from '../../src/runtime/create-idempotency.js';
import { postEffect, startCommitCounter } from '../../src/testing/index.js';
import { pgChargeOperation as charge } from '../fixtures/pg-backend.js';
import { TEST_KEYRING_SPEC } from './keyring.js';

const svc = await services({ embedded: true });
const ds = await startCommitCounter();
const idem = createIdempotency({
  postgres: svc.databaseUrl,
  schema: 'embedded_check',
  redis: svc.redisUrl,
  prefix: 'embedded_check_q',
  keyring: TEST_KEYRING_SPEC,
  logger: false,
  audit: { writer: true },
});
let commits = -1;
let results: string[] = [];
try {
  await idem.migrate();
  idem.worker(charge, async (input, ctx) => {
    const res = await postEffect<{ id: string }>(ds.url, input, ctx.idempotencyKey, ctx.signal);
    return { chargeId: res.body.id };
  });
  const first = await idem.enqueue(charge, { order: 'E-1', amount: 100 });
  const again = await idem.enqueue(charge, { order: 'E-1', amount: 100 });
  const job = await idem.queue(charge).getJob(first.jobId);
  const copies = await idem.queue(charge).addBulk([1, 2, 3].map(() => ({ name: charge.name, data: job?.data })));
  const ids = [first.jobId, ...copies.map((c) => c.id as string)];
  results = (await Promise.all(ids.map((id) => idem.result(charge, id, { timeoutMs: 60_000 })))).map((r) => r.chargeId);
  commits = ds.commits;
  process.stdout.write(`${JSON.stringify({ absorbed: again.added === false })}\n`);
} finally {
  await idem.close();
  await ds.close();
  await svc.stop();
}
process.stdout.write(
  `${JSON.stringify({
    databaseScheme: new URL(svc.databaseUrl).protocol,
    queueScheme: new URL(svc.redisUrl).protocol,
    embedded: svc.embeddedDataDir !== undefined,
    dataDirGone: svc.embeddedDataDir !== undefined && !existsSync(svc.embeddedDataDir),
    commits,
    results,
  })}\n`,
);
process.exit(0);
