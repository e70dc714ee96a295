import { afterAll, expect, it } from 'vitest';
import { createIdempotency } from '../../src/runtime/create-idempotency.js';
import { idempotencyOptionsFromEnv } from '../../src/runtime/from-env.js';
import { chargeOperation } from '../fixtures/operations.js';
import { TestContext, waitFor } from '../helpers/context.js';
import { TEST_KEYRING_SPEC } from '../helpers/keyring.js';
import { childEnv, runTs } from '../helpers/spawn.js';

/**
 * A deployment configures schema, prefix and keyring once, in the environment: the application's
 * runtime (`idempotencyOptionsFromEnv()`) and the operator's CLI read the same variables and meet
 * the same rows, queues and references. The task id is no identifier (it has spaces), so the
 * trail stores it as a keyed reference: the CLI finds the story only with the same ref keys.
 */
const t = new TestContext('runtime_from_env');

afterAll(() => t.teardown());

it('the runtime and the CLI built from the same variables see the same key and the same story', async () => {
  const env = {
    DATABASE_URL: t.databaseUrl,
    REDIS_URL: t.redisUrl,
    BQI_SCHEMA: t.schema,
    BQI_PREFIX: t.prefix,
    BQI_KEYRING: TEST_KEYRING_SPEC,
  };
  const idem = createIdempotency({ ...idempotencyOptionsFromEnv(env), audit: { writer: true } });
  const taskId = 'refund for order 17';
  let key = '';
  try {
    await idem.migrate();
    const charge = chargeOperation({ queue: 'env-payments' });
    idem.worker(charge, async (input) => ({ chargeId: `ch_${input.order}` }));
    const job = await idem.enqueue(charge, { order: 'o-17', amount: 500 }, { taskId });
    key = job.idempotencyKey;
    await waitFor(async () => {
      const story = await idem.timeline(taskId);
      return story.events.some((e) => e.action === 'idempotency.completed');
    }, 'the completed event in the trail');
  } finally {
    await idem.close();
  }

  const inspect = await runTs('src/cli/main.ts', ['inspect', key, '--json'], childEnv(env), 120_000);
  expect(inspect.code, inspect.stderr).toBe(0);
  expect(JSON.parse(inspect.stdout)).toMatchObject({ key, status: 'completed' });
  const story = await runTs('src/cli/main.ts', ['timeline', taskId], childEnv(env), 120_000);
  expect(story.code, story.stderr).toBe(0);
  expect(story.stdout).toContain('idempotency.completed');
});

it('names every variable that is missing', () => {
  expect(() => idempotencyOptionsFromEnv({ BQI_SCHEMA: 'x' })).toThrow(
    expect.objectContaining({
      code: 'IDEMPOTENCY_ENV_CONFIG',
      details: { variables: ['DATABASE_URL', 'REDIS_URL', 'BQI_KEYRING'] },
    }),
  );
});
