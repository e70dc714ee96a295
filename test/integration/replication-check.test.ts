/**
 * The operations process warns, once and with a stable code, when the database could lose a claim
 * it acknowledged (a failover to an asynchronous standby, `synchronous_commit` off or local):
 * the decision on the values read, and the warning of a process whose sessions commit with
 * `synchronous_commit = off` (a session setting: the shared server is not reconfigured).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/env.js';
import { ERROR_CODES } from '../../src/errors/idempotency-error.js';
import { type ReplicationFacts, readReplicationFacts, replicationRisk } from '../../src/ledger/replication-check.js';
import { startOperationsProcess } from '../../src/ops/operations-process.js';
import { TestContext } from '../helpers/context.js';
import { capturePino } from '../helpers/pino-capture.js';

const t = new TestContext('replication_check');

beforeAll(async () => {
  await t.setup();
});
afterAll(async () => {
  await t.teardown();
});

const facts = (synchronousCommit: string, ...states: (string | null)[]): ReplicationFacts => ({
  synchronousCommit,
  synchronousStandbyNames: states.length ? 'FIRST 1 (s0)' : '',
  standbys: states.map((syncState, i) => ({ name: `s${i}`, syncState })),
});

describe('replication risk', () => {
  it('decides from the settings and the standbys attached', () => {
    // Safe: one primary committing durably; synchronous standbys with on or remote_apply.
    expect(replicationRisk(facts('on'))).toBeNull();
    expect(replicationRisk(facts('local'))).toBeNull();
    expect(replicationRisk(facts('on', 'sync'))).toBeNull();
    expect(replicationRisk(facts('remote_apply', 'sync', 'quorum'))).toBeNull();
    // Not readable by this role (no pg_monitor): not a finding.
    expect(replicationRisk(facts('on', null))).toBeNull();
    // Lost on failover or crash.
    expect(replicationRisk(facts('on', 'sync', 'async'))).toEqual({
      reasons: ['async_standby'],
      asyncStandbys: ['s1'],
    });
    expect(replicationRisk(facts('on', 'potential'))).toEqual({ reasons: ['async_standby'], asyncStandbys: ['s0'] });
    expect(replicationRisk(facts('local', 'sync'))).toEqual({ reasons: ['commit_not_replicated'], asyncStandbys: [] });
    expect(replicationRisk(facts('OFF', 'async'))).toEqual({
      reasons: ['async_standby', 'commit_not_replicated'],
      asyncStandbys: ['s0'],
    });
    expect(replicationRisk(facts('off'))).toEqual({ reasons: ['commit_not_flushed'], asyncStandbys: [] });
  });

  it('reads the values from Postgres, and the operations process warns once with IDEMPOTENCY_ASYNC_REPLICA', async () => {
    const pool = t.pool(1);
    try {
      const read = await readReplicationFacts(pool);
      expect(read.synchronousCommit).toMatch(/^(on|off|local|remote_write|remote_apply)$/);
      expect(Array.isArray(read.standbys)).toBe(true);
    } finally {
      await pool.end();
    }
    const url = new URL(t.databaseUrl);
    url.searchParams.set('options', '-c synchronous_commit=off');
    const { logger, lines } = capturePino({ level: 'debug' });
    const proc = await startOperationsProcess(
      loadConfig({
        DATABASE_URL: url.toString(),
        REDIS_URL: t.redisUrl,
        BQI_SCHEMA: t.schema,
        BQI_PREFIX: t.prefix,
        BQI_AUDIT_QUEUE: 'audit-replication',
      }),
      { logger },
    );
    await proc.close();
    const warnings = lines()
      .split('\n')
      .filter((l) => l.includes(ERROR_CODES.asyncReplica))
      .map((l) => JSON.parse(l) as { level: number; reasons: string[]; synchronousCommit: string });
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatchObject({ level: 40, synchronousCommit: 'off' });
    expect(warnings[0]?.reasons).toContain('commit_not_flushed');
  });
});
