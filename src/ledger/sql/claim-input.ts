import { jobIdOfKey } from '../../keys/job-id.js';
import { DERIVED_JOB_ID } from '../recorded-transition.js';
import { code, fpBytes, ms, now } from './fragments.js';
import type { Clock } from './statement.js';

/**
 * One key's claim as the claim statements take it (`claim`, `insertNew`, `recordLost`): named
 * fields, in the order of the statements' parameters ({@link CLAIM_FIELDS}); the parts of the key
 * only when the key is hashed (otherwise null: the key spells them). Its facts
 * ({@link claimFactsText}) follow the clock offset, as $16.
 */
export type ClaimParams = {
  key: string;
  namespace: string | null;
  resourceKey: string | null;
  version: string | null;
  operation: string;
  fingerprint: string;
  leaseMs: number;
  retentionMs: number;
  downstream: string;
  owner: string | null;
  jobId: string | null;
  queue: string | null;
  taskId: string | null;
  stepId: string | null;
};

/** The claim statements' parameters $1..$14, one array per field. */
export const CLAIM_FIELDS = [
  'key',
  'namespace',
  'resourceKey',
  'version',
  'operation',
  'fingerprint',
  'leaseMs',
  'retentionMs',
  'downstream',
  'owner',
  'jobId',
  'queue',
  'taskId',
  'stepId',
] as const satisfies readonly (keyof ClaimParams)[];

/** Keys of a batch claim, rows in the given order, and the test-only clock offset ($15). */
export type ClaimBatch = { claims: readonly ClaimParams[] } & Clock;

/**
 * A new claim's facts as its record of transitions stores them (see fragments.ts: `o` owner,
 * `j` job id, `q` queue, `k` task id, nulls left out), or null when it has none. Made here as JSON
 * text rather than in Postgres: building, stripping and casting a jsonb object cost about 2 µs a
 * row of a fresh claim's insert. A job id derived from the key (what the library's jobs carry) is
 * stored as the marker `1` ({@link DERIVED_JOB_ID}).
 */
export function claimFactsText(c: ClaimParams): string | null {
  if (c.owner === null && c.jobId === null && c.queue === null && c.taskId === null) return null;
  const facts: Record<string, string | number> = {};
  if (c.owner !== null) facts.o = c.owner;
  if (c.jobId !== null) facts.j = c.jobId.length === 48 && c.jobId === jobIdOfKey(c.key) ? DERIVED_JOB_ID : c.jobId;
  if (c.queue !== null) facts.q = c.queue;
  if (c.taskId !== null) facts.k = c.taskId;
  return JSON.stringify(facts);
}

/** The claim statements' values $1..$16: one array per field, the clock offset, the facts. */
export const claimValues = ({ claims, clockOffsetMs }: ClaimBatch): unknown[] => [
  ...CLAIM_FIELDS.map((field) => claims.map((c) => c[field])),
  clockOffsetMs,
  claims.map(claimFactsText),
];

/** The database time of the claim statements (their clock offset is $15). */
export const CLAIM_NOW = now(15);

/**
 * The claim statements' input: $1..$14, one array per field (CLAIM_FIELDS' order), and $16 each
 * claim's facts as the record stores them (JSON text or null, made by `claimFactsText`), as rows `i`.
 */
export const CLAIM_INPUT = `unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::int8[], $8::int8[],
    $9::text[], $10::text[], $11::text[], $12::text[], $13::text[], $14::text[], $16::text[])
    as i(key, namespace, resource_key, version, operation, fingerprint, lease_ms, retention_ms, downstream, owner,
      job_id, queue, task_id, step_id, facts)`;

/**
 * A claim's `sweep_after` (migration 0010): the claim's time plus the retention, before which
 * the row cannot expire (it expires a retention after its last transition, which is not
 * earlier than this claim). Written by claims only, so a completion changes no indexed column.
 */
export const sweepAfter = (i: string) => `${CLAIM_NOW} + ${i}.retention_ms * interval '1 millisecond'`;

/**
 * The insert of a claimed row (epoch 1, locked) for each input row `i`; its FROM follows. With
 * `jobColumns` false the lease owner, job id and queue columns are left null: the claim's entry in
 * the record of transitions holds them (`o`, `j`, `q`; migration 0016). The full claim stores them, since its
 * upsert's update takes the facts of its entry from the proposed row (`excluded`).
 */
export const insertClaimed = (
  table: string,
  jobColumns = true,
) => `insert into ${table} as l (key, namespace, resource_key, version, operation, fingerprint, status, epoch,
    downstream, lease_owner, lease_expires_at, retention_ms, last_transition, job_id, queue, task_id, step_id, created_at,
    updated_at, claimed_at, claim_transition, transitions, sweep_after)
  select i.key, i.namespace, i.resource_key, i.version, i.operation, ${fpBytes('i.fingerprint')}, 'locked', 1, i.downstream, ${jobColumns ? 'i.owner' : 'null'},
    ${CLAIM_NOW} + i.lease_ms * interval '1 millisecond', i.retention_ms, null, ${jobColumns ? 'i.job_id, i.queue' : 'null, null'}, i.task_id, i.step_id,
    null, ${CLAIM_NOW}, null, null, '[' || ${code('claimed')} || ',1,' || ${ms(CLAIM_NOW)} || coalesce(',' || i.facts, '') || ']', ${sweepAfter('i')}`;
