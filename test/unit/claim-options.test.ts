/**
 * The wrapper's claim options: the ids the ledger stores (job, task, step, as the audit trail
 * tells them) are made on their first read and only then, once, whatever reads them; a claim
 * made again with the stored fingerprint (after a keyring rotation) keeps them; and what they are
 * made from (the runner's settings, its keyring among them) is no property of the options.
 */
import type { Job } from 'bullmq';
import { describe, expect, it } from 'vitest';
import type { StoredIdentifierField } from '../../src/audit/stored-identifier.js';
import { claimKey, claimOptions } from '../../src/worker/claim.js';
import type { AttemptScope, RunnerSettings } from '../../src/worker/types.js';

type Call = { field: StoredIdentifierField; value: string; operationId: string | undefined };

/** Settings whose `ids` stores each id as `<field>:<value>` and counts its calls. */
function settings(claims: unknown[] = []): { s: RunnerSettings<unknown>; calls: Call[] } {
  const calls: Call[] = [];
  const s = {
    op: { leaseMs: 5_000, retentionMs: 60_000, downstream: 'idempotent', name: 'pay.charge' },
    owner: 'host:1',
    keyring: { secret: 'never shown' },
    ids: (field: StoredIdentifierField, value: string, context?: { operationId?: string }) => {
      calls.push({ field, value, operationId: context?.operationId });
      return `${field}:${value}`;
    },
    options: {
      ledger: {
        claim: async (options: unknown) => {
          claims.push(options);
          return claims.length === 1
            ? { kind: 'conflict', storedFingerprint: 'fp1:k1:stored', fingerprint: 'fp1:k2:now' }
            : { kind: 'acquired' };
        },
      },
    },
  } as unknown as RunnerSettings<unknown>;
  return { s, calls };
}

function scope(over: Partial<AttemptScope> = {}): AttemptScope {
  return {
    job: { id: 'idem_job', queueName: 'payments' } as Job,
    token: 'tok',
    key: { namespace: 'pay', resourceKey: 'order-1', version: 'v1' },
    k: 'pay:order-1:v1',
    taskId: 'task-9',
    facts: { attemptsMade: 0, attemptsStarted: 1, stalledCounter: 0 },
    ...over,
  };
}

describe("the wrapper's claim options", () => {
  it('make no id while only the other options are read (a replay)', () => {
    const { s, calls } = settings();
    const o = claimOptions(s, scope(), 'pay.charge', 'fp1');
    expect([o.key, o.operation, o.fingerprint, o.leaseMs, o.retentionMs, o.downstream, o.owner, o.queue]).toEqual([
      { namespace: 'pay', resourceKey: 'order-1', version: 'v1' },
      'pay.charge',
      'fp1',
      5_000,
      60_000,
      'idempotent',
      'host:1',
      'payments',
    ]);
    expect(calls).toEqual([]);
  });

  it('make each id on its first read, once, the job id checked against the key', () => {
    const { s, calls } = settings();
    const o = claimOptions(s, scope(), 'pay.charge', 'fp1');
    expect(o.jobId).toBe('jobId:idem_job');
    expect(calls).toEqual([{ field: 'jobId', value: 'idem_job', operationId: 'pay:order-1:v1' }]);
    expect(o.taskId).toBe('taskId:task-9');
    expect(o.stepId).toBeUndefined();
    expect([o.jobId, o.taskId, o.stepId]).toEqual(['jobId:idem_job', 'taskId:task-9', undefined]);
    expect(calls).toEqual([
      { field: 'jobId', value: 'idem_job', operationId: 'pay:order-1:v1' },
      { field: 'taskId', value: 'task-9', operationId: undefined },
    ]);
  });

  it("check a step's job id against its operation's key", () => {
    const { s, calls } = settings();
    const o = claimOptions(
      s,
      scope({ stepId: 'notify', parentK: 'pay:order-1:v1', k: 'pay:order-1:v1#notify', taskId: undefined }),
      'pay.charge#notify',
      'fp1',
    );
    expect([o.stepId, o.taskId, o.jobId]).toEqual(['stepId:notify', undefined, 'jobId:idem_job']);
    expect(calls).toEqual([
      { field: 'stepId', value: 'notify', operationId: undefined },
      { field: 'jobId', value: 'idem_job', operationId: 'pay:order-1:v1' },
    ]);
  });

  it('hold none of their settings as properties', () => {
    const { s } = settings();
    const o = claimOptions(s, scope(), 'pay.charge', 'fp1');
    expect(JSON.stringify(o)).not.toContain('never shown');
    expect(Object.keys(o).sort()).toEqual(
      ['downstream', 'fingerprint', 'key', 'leaseMs', 'operation', 'owner', 'queue', 'retentionMs'].sort(),
    );
  });

  it('claimed again with the stored fingerprint keep their ids, made once for both claims', async () => {
    const claims: unknown[] = [];
    const { s, calls } = settings(claims);
    (s as { keyring: unknown }).keyring = { has: () => true, currentId: 'k2' };
    // The stored fingerprint was made with k1, no longer the current key: the input is fingerprinted again with it.
    (s.op as { fingerprintOf: unknown }).fingerprintOf = (_input: unknown, _ring: unknown, keyId: string) =>
      `fp1:${keyId}:stored`;
    const o = claimOptions(s, scope(), 'pay.charge', 'fp1:k2:now');
    const first = o.jobId;
    const out = await claimKey(s, o, { value: { order: 1 } });
    expect(first).toBe('jobId:idem_job');
    expect(out.fingerprint).toBe('fp1:k1:stored');
    expect(claims).toHaveLength(2);
    const again = claims[1] as { fingerprint: string; jobId: string; taskId: string };
    expect(again.fingerprint).toBe('fp1:k1:stored');
    expect([again.jobId, again.taskId]).toEqual(['jobId:idem_job', 'taskId:task-9']);
    expect(calls).toHaveLength(2);
  });
});
