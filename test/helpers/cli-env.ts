import type { TestContext } from './context.js';
import { childEnv } from './spawn.js';

/**
 * The environment of a CLI run against a test file's database, Redis, schema and prefix (audit
 * queue `audit`), with `vars` on top (an undefined value unsets).
 */
export function cliEnv(t: TestContext, vars: Record<string, string | undefined> = {}): NodeJS.ProcessEnv {
  return childEnv({
    DATABASE_URL: t.databaseUrl,
    REDIS_URL: t.redisUrl,
    BQI_SCHEMA: t.schema,
    BQI_PREFIX: t.prefix,
    BQI_AUDIT_QUEUE: 'audit',
    ...vars,
  });
}
