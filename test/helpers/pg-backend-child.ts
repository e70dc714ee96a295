/**
 * A worker of the runtime on BullMQ's PostgreSQL backend in its own OS process: it charges the
 * commit-counting downstream, prints `{"event":"committed"}` once the downstream answered, then
 * blocks, so the test can SIGKILL it after the commit and before anything is recorded.
 *
 * Usage: node --import tsx test/helpers/pg-backend-child.ts '<PgBackendChildConfig as JSON>'.
 */
import { writeSync } from 'node:fs';
import { createIdempotency } from '../../src/runtime/create-idempotency.js';
import { postEffect } from '../../src/testing/index.js';
import { pgKilledChargeOperation } from '../fixtures/pg-backend.js';
import { TEST_KEYRING_SPEC } from './keyring.js';

export type PgBackendChildConfig = {
  databaseUrl: string;
  queueUrl: string;
  schema: string;
  prefix: string;
  downstreamUrl: string;
  lockDuration: number;
  stalledInterval: number;
};

const config = JSON.parse(process.argv[2] ?? '{}') as PgBackendChildConfig;
const say = (line: object) => writeSync(1, `${JSON.stringify(line)}\n`);

const idem = createIdempotency({
  postgres: config.databaseUrl,
  schema: config.schema,
  redis: config.queueUrl,
  prefix: config.prefix,
  keyring: TEST_KEYRING_SPEC,
  logger: false,
  audit: false,
});
idem.worker(
  pgKilledChargeOperation,
  async (input, ctx) => {
    const res = await postEffect<{ id: string }>(config.downstreamUrl, input, ctx.idempotencyKey, ctx.signal);
    say({ event: 'committed', effect: res.body.id });
    // Killed here: the downstream committed, the ledger records nothing.
    await new Promise(() => {});
    return { chargeId: res.body.id };
  },
  { lockDuration: config.lockDuration, stalledInterval: config.stalledInterval },
);
say({ event: 'ready', pid: process.pid });
