import { hostname } from 'node:os';
import type { Job } from 'bullmq';
import type { Kysely } from 'kysely';
import { type IdentifierStorer, identifierStorer } from '../audit/stored-identifier.js';
import { auditPolicyFor } from '../config/audit-policy.js';
import { withoutParkedMark } from '../confirm/parked-job.js';
import { IdempotencyConfigError, InvalidInputError } from '../errors/errors.js';
import { zodIssues } from '../errors/zod-issues.js';
import { boundedKey, type IdempotencyKey, parseIdempotencyKey } from '../keys/idempotency-key.js';
import {
  ENVELOPE_FIELD,
  envelopeSchema,
  type JobEnvelope,
  looksLikeEnvelope,
  readEnvelope,
} from '../operation/envelope.js';
import type { Operation } from '../operation/operation.js';
import { assertRetentionCovers, BULLMQ_DEFAULTS, retryWindowMs } from '../operation/retry-window.js';
import type { Keyring } from '../sealing/keyring.js';
import { assertInputKey, openInput } from '../sealing/sealed-input.js';
import type { AttemptFacts, RunnerSettings, WithIdempotencyOptions } from './types.js';

// Resolving, before anything is claimed: the wrapper's settings once, when the worker is built;
// each job's input, key and counters as an attempt starts.

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

/** The counters BullMQ set on `job` for this attempt. */
export function factsOf(job: Job): AttemptFacts {
  return {
    attemptsMade: job.attemptsMade ?? 0,
    attemptsStarted: job.attemptsStarted ?? 0,
    stalledCounter: job.stalledCounter ?? 0,
  };
}

export type ResolvedJob = {
  input: unknown;
  key: IdempotencyKey;
  /** The bounded key string of `key`. */
  k: string;
  taskId: string | undefined;
};

/**
 * Reads the input and the operation key of a job. A job enqueued by the producer helper carries
 * its key; any other job (a plain `queue.add`, an existing producer) gets it from the
 * operation's `resourceKey(input)`. A job-scheduler occurrence adds its scheduled time, so each
 * occurrence is its own operation. Sealed `sensitiveInput` fields are opened before validation,
 * and refused when sealed for another operation, field or key (or, in the helper's jobs, in
 * clear). Throws an IdempotencyError for anything malformed.
 */
export function resolveJob(op: Operation, job: Job, keyring: Keyring): ResolvedJob {
  let input: unknown;
  let key: IdempotencyKey;
  let k: string;
  let taskId: string | undefined;
  const data = withoutParkedMark(job.data);
  const occurrence = schedulerOccurrence(job);
  if (looksLikeEnvelope(data)) {
    const envelope = readEnvelope(data) ?? parseEnvelope(op, data);
    const meta = envelope[ENVELOPE_FIELD];
    if (meta.operation !== op.name) {
      throw new InvalidInputError(`job data of ${op.name}`, [
        { path: `${ENVELOPE_FIELD}.operation`, message: `job was enqueued for operation ${meta.operation}` },
      ]);
    }
    const opened = openInput(op, envelope.input, keyring, true);
    k = boundedKey(meta.key);
    assertInputKey(opened, k);
    input = op.parseInput(opened.input);
    key = ownKey(op, meta.key, input);
    taskId = meta.taskId;
  } else {
    const opened = openInput(op, data, keyring, false);
    input = op.parseInput(opened.input);
    // A scheduler's template data is the same for every occurrence: without a resourceKey
    // function the scheduler id names the operation, and the occurrence time is added below.
    key =
      occurrence && !op.definition.resourceKey ? op.keyFor(input, `scheduler:${job.repeatJobKey}`) : op.keyFor(input);
    k = boundedKey(key);
    assertInputKey(opened, k);
  }
  if (occurrence) {
    key = parseIdempotencyKey({ ...key, resourceKey: `${key.resourceKey}@${occurrence}` });
    k = boundedKey(key);
  }
  return { input, key, k, taskId };
}

/**
 * The key an envelope carries, when it is a key of this operation: its namespace the one the
 * operation gives this input, its version the operation's. A job naming operation X but carrying
 * Y's key would otherwise claim and complete Y's key (and Y's own first job would then meet a
 * conflict): refused as invalid input, before any claim.
 */
function ownKey(op: Operation, carried: IdempotencyKey, input: unknown): IdempotencyKey {
  // The carried key is well-formed (read through the key schema): one whose namespace and version
  // are the operation's is its own key as it stands, with nothing made or checked again.
  const { namespace } = op.definition;
  if (
    carried.version === op.version &&
    carried.namespace === (typeof namespace === 'function' ? namespace(input) : namespace)
  ) {
    return carried;
  }
  const own = op.keyFor(input, carried.resourceKey);
  const issues = (['namespace', 'version'] as const)
    .filter((part) => carried[part] !== own[part])
    .map((part) => ({
      path: `${ENVELOPE_FIELD}.key.${part}`,
      message: `is not the ${part} of operation ${op.name}'s keys`,
    }));
  if (issues.length > 0) throw new InvalidInputError(`job data of ${op.name}`, issues);
  return carried;
}

/** `repeat:<schedulerId>:<millis>` → millis, for job-scheduler occurrences. */
function schedulerOccurrence(job: Job): string | undefined {
  if (!job.repeatJobKey || !job.id?.startsWith('repeat:')) return undefined;
  const millis = job.id.slice(job.id.lastIndexOf(':') + 1);
  return /^\d+$/.test(millis) ? millis : undefined;
}

/** Job data that is not a plain well-formed envelope, through the schema: its own or an error naming every issue. */
function parseEnvelope(op: Operation, data: unknown): JobEnvelope {
  const parsed = envelopeSchema.safeParse(data);
  if (!parsed.success) throw new InvalidInputError(`job data of ${op.name}`, zodIssues(parsed.error, envelopeSchema));
  return parsed.data as JobEnvelope;
}
