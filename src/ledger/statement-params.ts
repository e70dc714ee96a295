import { encodeArrays } from '../db/array-literal.js';
import type { LedgerStatements } from './statements.js';

/**
 * One key's claim as the claim statements take it (`claim`, `insertNew`): named fields, in the
 * order of the statements' parameters ({@link CLAIM_FIELDS}); the parts of the key only when the
 * key is hashed (otherwise null: the key spells them). Its facts ({@link claimFactsText}) follow
 * the clock offset, as $16.
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
type ClaimBatch = { claims: readonly ClaimParams[]; clockOffsetMs: number };
type Clock = { clockOffsetMs: number };
type Operator = { actorId: string | null; reason: string | null };

/**
 * A new claim's facts as its record of transitions stores them (see statements.ts: `o` owner,
 * `j` job id, `q` queue, `k` task id, nulls left out), or null when it has none. Made here as JSON
 * text rather than in Postgres: building, stripping and casting a jsonb object cost about 2 µs a
 * row of a fresh claim's insert.
 */
export function claimFactsText(c: ClaimParams): string | null {
  if (c.owner === null && c.jobId === null && c.queue === null && c.taskId === null) return null;
  const facts: Record<string, string> = {};
  if (c.owner !== null) facts.o = c.owner;
  if (c.jobId !== null) facts.j = c.jobId;
  if (c.queue !== null) facts.q = c.queue;
  if (c.taskId !== null) facts.k = c.taskId;
  return JSON.stringify(facts);
}

const claimValues = ({ claims, clockOffsetMs }: ClaimBatch): unknown[] => [
  ...CLAIM_FIELDS.map((field) => claims.map((c) => c[field])),
  clockOffsetMs,
  claims.map(claimFactsText),
];

/**
 * Each statement's parameters by name, turned into the positional values of its text (see
 * statements.ts, whose comments number them): the only place that knows their order.
 */
export const STATEMENT_PARAMS = {
  claim: claimValues,
  insertNew: claimValues,
  recordLost: (p: ClaimBatch & { epoch: number; errorJson: string }) => [...claimValues(p), p.epoch, p.errorJson],
  peek: (p: { keys: readonly string[]; fingerprints: readonly string[] } & Clock) => [
    p.keys,
    p.fingerprints,
    p.clockOffsetMs,
  ],
  heartbeat: (p: { key: string; epoch: number; leaseMs: number } & Clock) => [
    p.key,
    p.epoch,
    p.leaseMs,
    p.clockOffsetMs,
  ],
  complete: (p: { completions: readonly { key: string; epoch: number; text: string }[] } & Clock) => [
    p.completions.map((c) => c.key),
    p.completions.map((c) => c.epoch),
    p.completions.map((c) => c.text),
    p.clockOffsetMs,
  ],
  finish: (
    p: {
      key: string;
      epoch: number;
      errorJson: string | null;
      status: string;
      transition: string;
      retryable: boolean | null;
      reasonCode: string | null;
    } & Clock,
  ) => [p.key, p.epoch, p.errorJson, p.clockOffsetMs, p.status, p.transition, p.retryable, p.reasonCode],
  current: (p: { key: string }) => [p.key],
  get: (p: { key: string }) => [p.key],
  invalidate: (p: { key: string } & Clock & Operator) => [p.key, p.clockOffsetMs, p.actorId, p.reason],
  resolve: (p: { key: string; resultJson: string | null; committed: boolean } & Clock & Operator) => [
    p.key,
    p.resultJson,
    p.clockOffsetMs,
    p.committed,
    p.actorId,
    p.reason,
  ],
  sweepCandidates: (p: { batchSize: number; afterAt: string; afterKey: string } & Clock) => [
    p.batchSize,
    p.clockOffsetMs,
    p.afterAt,
    p.afterKey,
  ],
  storedEventIds: (p: { eventIds: readonly string[] }) => [p.eventIds],
  sweepKeys: (p: { keys: readonly string[] }) => [p.keys],
} satisfies { [N in keyof LedgerStatements]: (params: never) => unknown[] };

export type StatementName = keyof typeof STATEMENT_PARAMS;
/** The named parameters of statement `N`. */
export type ParamsOf<N extends StatementName> = Parameters<(typeof STATEMENT_PARAMS)[N]>[0];

/** The positional values of statement `name` for `params`, arrays as their text ({@link encodeArrays}). */
export function statementValues<N extends StatementName>(name: N, params: ParamsOf<N>): unknown[] {
  return encodeArrays((STATEMENT_PARAMS[name] as (p: ParamsOf<N>) => unknown[])(params));
}
