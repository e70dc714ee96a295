import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/env.js';
import { parseRedisUrl } from '../../src/config/redis-url.js';
import { createIdempotency } from '../../src/runtime/create-idempotency.js';
import { isPostgresQueueUrl, queueBackendKind, queueSchemaOf } from '../../src/shared/queue-backend.js';
import { TEST_KEYRING_SPEC } from '../helpers/keyring.js';

/** Choosing BullMQ's PostgreSQL backend by configuration: a `postgres://` queue URL. */
describe('the queue backend chosen by the queue URL', () => {
  it('reads a postgres:// or postgresql:// queue URL as BullMQ’s PostgreSQL backend', () => {
    expect(parseRedisUrl('postgres://app@db:5432/app')).toEqual({
      kind: 'postgres',
      url: 'postgres://app@db:5432/app',
    });
    expect(parseRedisUrl('postgresql://db/app').kind).toBe('postgres');
    expect(parseRedisUrl('redis://127.0.0.1:6379').kind).toBe('single');
    expect(isPostgresQueueUrl('redis://x')).toBe(false);
    expect(() => parseRedisUrl('postgres://')).toThrow(/postgres:\/\/ URL naming a host/);
  });

  it('takes REDIS_URL=postgres://… in the operations process’s configuration', () => {
    const config = loadConfig({
      DATABASE_URL: 'postgres://db/app',
      REDIS_URL: 'postgres://db/app',
      BQI_PREFIX: 'app_q',
    });
    expect(config.redisUrl).toBe('postgres://db/app');
  });

  it('names BullMQ’s schema by the prefix, braces dropped, and refuses one that is no identifier', () => {
    expect(queueSchemaOf('payments_q')).toBe('payments_q');
    expect(queueSchemaOf('{payments}')).toBe('payments');
    expect(() => queueSchemaOf('bqi-demo')).toThrow(expect.objectContaining({ code: 'IDEMPOTENCY_CONFIG' }));
  });

  it('opens the runtime’s queues on the backend of its URL, and refuses a bad prefix before connecting', async () => {
    const base = { postgres: 'postgres://127.0.0.1:1/none', keyring: TEST_KEYRING_SPEC, logger: false as const };
    const pgIdem = createIdempotency({ ...base, redis: 'postgres://127.0.0.1:1/none', prefix: 'q_schema' });
    const redisIdem = createIdempotency({ ...base, redis: 'redis://127.0.0.1:1' });
    try {
      expect(queueBackendKind(pgIdem.connection)).toBe('postgres');
      expect(pgIdem.queueBackend).toBeTypeOf('function');
      expect(queueBackendKind(redisIdem.connection)).toBe('redis');
      expect(redisIdem.queueBackend).toBeUndefined();
    } finally {
      await pgIdem.close();
      await redisIdem.close();
    }
    expect(() => createIdempotency({ ...base, redis: 'postgres://127.0.0.1:1/none', prefix: '{a-b}' })).toThrow(
      expect.objectContaining({ code: 'IDEMPOTENCY_CONFIG', details: expect.objectContaining({ option: 'prefix' }) }),
    );
  });
});
