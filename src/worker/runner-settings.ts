import { hostname } from 'node:os';
import type { Kysely } from 'kysely';
import { type IdentifierStorer, identifierStorer } from '../audit/stored-identifier.js';
import { auditPolicyFor } from '../config/audit-policy.js';
import { IdempotencyConfigError } from '../errors/errors.js';
import type { Operation } from '../operation/operation.js';
import { assertRetentionCovers, BULLMQ_DEFAULTS, retryWindowMs } from '../operation/retry-window.js';
import type { Keyring } from '../sealing/keyring.js';
import type { WithIdempotencyOptions } from './types.js';

/** The checked configuration of one wrapped processor, shared by every phase of its attempts. */
export type RunnerSettings<DB = unknown> = {
  readonly op: Operation;
  readonly options: WithIdempotencyOptions<DB>;
  readonly keyring: Keyring;
  /** Who holds the leases this process takes. */
  readonly owner: string;
  /** Where `ctx.tx` opens its transactions. */
  readonly db: Kysely<DB>;
  /** How long a job waits (delayed) before it looks again at a key in progress elsewhere. */
  readonly pollMs: number;
  /** Task, job and step ids and queue names as the ledger, confirmations and logs keep them (see `identifierAsStored`). */
  readonly ids: IdentifierStorer;
};

/**
 * Checks the options at wrap time, so a bad setting fails when the worker is built rather than
 * on the first job: a keyring is required, the lease must be shorter than BullMQ's lock, and the
 * queue's retry window must fit in the operation's retention.
 */
export function resolveSettings<DB>(op: Operation, options: WithIdempotencyOptions<DB>): RunnerSettings<DB> {
  if (!options.keyring || typeof options.keyring.seal !== 'function') {
    throw new IdempotencyConfigError(
      `Operation ${op.name}: withIdempotency needs a keyring (defineKeyring) to seal results and error text`,
      { option: 'keyring' },
    );
  }
  const lockDuration = options.worker?.lockDuration ?? BULLMQ_DEFAULTS.lockDuration;
  if (op.leaseMs >= lockDuration) {
    throw new IdempotencyConfigError(
      `Operation ${op.name}: lease ${op.leaseMs} ms must be shorter than the worker's lockDuration ${lockDuration} ms, so a crashed attempt's lease has expired when BullMQ redelivers the job`,
      { option: 'lease', leaseMs: op.leaseMs, lockDuration },
    );
  }
  if (options.jobOptions) {
    assertRetentionCovers(op.name, op.retentionMs, retryWindowMs(options.jobOptions, options.worker, op.retryWindow));
  }
  return {
    op,
    options,
    keyring: options.keyring,
    owner: options.owner ?? `${hostname()}:${process.pid}`,
    db: (options.db ?? options.ledger.db) as Kysely<DB>,
    ids: identifiersOf(options),
    pollMs: options.inProgressPollMs ?? Math.min(1000, Math.max(50, Math.floor(op.leaseMs / 10))),
  };
}

/** How the wrapper keeps ids (see `identifierAsStored`): under `identifierPolicy`, else the keyring's built-in policy. */
export function identifiersOf(
  options: Pick<WithIdempotencyOptions<unknown>, 'identifierPolicy' | 'keyring'>,
): IdentifierStorer {
  return identifierStorer(options.identifierPolicy ?? auditPolicyFor(options.keyring));
}
