import { createIdempotency, type Idempotency } from '../../src/runtime/create-idempotency.js';
import type { IdempotencyOptions } from '../../src/runtime/options.js';
import type { TestContext } from './context.js';
import { TEST_KEYRING_SPEC } from './keyring.js';

/** Where a test's runtime lives: the file's schema and prefix, and the test keyring. */
export function runtimePlace(t: TestContext) {
  return {
    postgres: t.databaseUrl,
    schema: t.schema,
    redis: t.redisUrl,
    prefix: t.prefix,
    keyring: TEST_KEYRING_SPEC,
  } satisfies Partial<IdempotencyOptions>;
}

/**
 * A runtime in the file's schema and prefix with the test keyring, quiet (no audit, no logs)
 * unless `overrides` says otherwise; the caller closes it.
 */
export function testRuntime(t: TestContext, overrides: Partial<IdempotencyOptions> = {}): Idempotency {
  return createIdempotency({ ...runtimePlace(t), audit: false, logger: false, ...overrides });
}
