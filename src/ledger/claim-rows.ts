import { storableText } from '../db/storable.js';
import { IdempotencyConfigError, IllegalTransitionError, InvalidInputError } from '../errors/errors.js';
import { boundedKey, parseIdempotencyKey } from '../keys/idempotency-key.js';
import type { ClaimAnswerRow } from './sql/claim.js';
import type { ClaimBatch, ClaimParams } from './sql/claim-input.js';
import type { Int8 } from './sql/statement.js';
import { type AcquiringTransition, type ClaimTransition, TRANSITIONS, transitionSpec } from './transitions.js';
import type { ClaimOptions, ClaimOutcome, KeyLike, RecordedError } from './types.js';

/**
 * One key's claim: its bounded key and the claim statements' parameters. `hasRow`: an insert
 * found the key with a row, so only the full claim can claim it. `ids`: the options whose job,
 * task and step ids the parameters do not hold yet ({@link writtenClaim} reads them).
 */
export type ClaimRow = { key: string; claim: ClaimParams; hasRow?: true; ids?: ClaimOptions | undefined };

/** A claim's options as the claim statements take them (checked). */
export function claimRowOf(options: ClaimOptions): ClaimRow {
  const key = parseIdempotencyKey(options.key);
  checkPositiveMs('leaseMs', options.leaseMs);
  checkPositiveMs('retentionMs', options.retentionMs);
  const k = boundedKey(key);
  // The parts are stored only when the key is hashed: otherwise the key spells them. Only the
  // hashed form holds '#' (a canonical string never does), so the canonical string is not made again.
  const hashed = k.includes('#');
  const claim: ClaimParams = {
    key: k,
    namespace: hashed ? key.namespace : null,
    resourceKey: hashed ? key.resourceKey : null,
    version: hashed ? key.version : null,
    operation: storableText(options.operation),
    fingerprint: options.fingerprint,
    leaseMs: options.leaseMs,
    retentionMs: options.retentionMs,
    downstream: options.downstream,
    owner: textColumn(options.owner),
    jobId: null,
    queue: textColumn(options.queue),
    taskId: null,
    stepId: null,
  };
  // The ids are read from the options when a claim statement writes them (writtenClaim): a read
  // that answers the claim (a replay) needs neither them nor what they cost the caller to make.
  return { key: k, claim, ids: options };
}

/** The claim statements' parameters of `r`, its job, task and step ids read from its options (once). */
export function writtenClaim(r: ClaimRow): ClaimParams {
  const ids = r.ids;
  if (ids !== undefined) {
    r.claim.jobId = textColumn(ids.jobId);
    r.claim.taskId = textColumn(ids.taskId);
    r.claim.stepId = textColumn(ids.stepId);
    r.ids = undefined;
  }
  return r.claim;
}

/**
 * The row a plain insert created, from what the claim asked for and the database time it
 * returned: status locked at epoch 1, the lease running from that time.
 */
export function newRow(req: ClaimRow, inserted: { at_ms: Int8 }): ClaimAnswerRow {
  const at = Number(inserted.at_ms);
  return {
    key: req.key,
    acquired: true,
    claimable: true,
    status: 'locked',
    epoch: 1,
    fingerprint: req.claim.fingerprint,
    transition: 'claimed',
    lease_expires_ms: at + req.claim.leaseMs,
    result: null,
    error: null,
    completed_ms: null,
    expires_ms: null,
    retry_after_ms: null,
    at_ms: inserted.at_ms,
  };
}

/** Rows in key order (batches lock their rows in that order), a copy when there is more than one. */
export function inKeyOrder<T extends { key: string }>(rows: readonly T[]): readonly T[] {
  return rows.length > 1 ? [...rows].sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0)) : rows;
}

/** The claim statements' named parameters: the claims in the given order. */
export function claimsOf(rows: readonly ClaimRow[], clockOffsetMs: number): ClaimBatch {
  return { claims: rows.map(writtenClaim), clockOffsetMs };
}

/** A key as the ledger's rows name it: a bounded key string as given, or a key's bounded form. */
export function toKey(key: KeyLike): string {
  if (typeof key === 'string') {
    if (key.length === 0 || key.length > 255) {
      throw new InvalidInputError('key', [
        { path: 'key', message: 'must be a bounded key string of 1..255 characters' },
      ]);
    }
    return key;
  }
  return boundedKey(parseIdempotencyKey(key));
}

export function checkPositiveMs(option: string, value: number): void {
  if (!Number.isFinite(value) || value <= 0 || !Number.isInteger(value)) {
    throw new IdempotencyConfigError(`${option} must be a positive whole number of milliseconds, got ${value}`, {
      option,
    });
  }
}

/** An optional free-text column of a claim (operation, owner, job id, queue, task, step). */
export const textColumn = (v: string | undefined): string | null => (v === undefined ? null : storableText(v));

/** What a claim statement answered of a key, as the claim's outcome for a claimer of fingerprint `fp`. */
export function toOutcome(row: ClaimAnswerRow, fp: string): ClaimOutcome {
  const { key, epoch, status } = row;
  const at = atOf(row);
  if (row.acquired) {
    const transition = claimTransitionOf(row);
    if (!TRANSITIONS[transition].startsAttempt) {
      return { kind: 'unknown', key, epoch, error: row.error as RecordedError, transitioned: true, at };
    }
    return {
      kind: 'acquired',
      key,
      epoch,
      leaseExpiresAt: msDate(row.lease_expires_ms),
      transition: transition as AcquiringTransition,
      at,
    };
  }
  if (row.fingerprint !== fp) {
    return { kind: 'conflict', key, status, storedFingerprint: row.fingerprint, fingerprint: fp, at };
  }
  switch (status) {
    case 'completed':
      return {
        kind: 'completed',
        key,
        epoch,
        result: row.result,
        completedAt: msDate(row.completed_ms),
        expiresAt: msDate(row.expires_ms),
        at,
      };
    case 'failed':
      return { kind: 'failed', key, epoch, error: row.error as RecordedError, expiresAt: msDate(row.expires_ms), at };
    case 'locked':
      return {
        kind: 'inProgress',
        key,
        epoch,
        leaseExpiresAt: msDate(row.lease_expires_ms),
        retryAfterMs: Number(row.retry_after_ms),
        at,
      };
    case 'unknown':
      return { kind: 'unknown', key, epoch, error: row.error ?? null, transitioned: false, at };
    default:
      // released/invalidated with the same fingerprint are claimable and never reach here.
      throw new IllegalTransitionError({ key, from: status, action: 'claim' });
  }
}

/**
 * The claim transition a claim statement says it made (its `transition` column). Anything else is
 * refused with a library error naming the key, never read as a transition: a statement that
 * wrote a row and answered no transition would otherwise surface as a TypeError after the write.
 */
function claimTransitionOf(row: ClaimAnswerRow): ClaimTransition {
  const name = row.transition;
  const spec = typeof name === 'string' ? transitionSpec(name) : undefined;
  if (spec?.by !== 'claim') {
    throw new IllegalTransitionError({
      key: row.key,
      from: row.status ?? null,
      action: `read the claim transition (${JSON.stringify(name ?? null)}, not a claim transition) of`,
    });
  }
  return name as ClaimTransition;
}

/** The database time a statement returned, in whole milliseconds (as its recorded transition has it). */
export const atOf = (row: { at_ms: Int8 }): Date => new Date(Number(row.at_ms));

/** A time a claim returned as whole milliseconds (int8: the driver gives it as text; a number from newRow). */
const msDate = (v: Int8 | null): Date => new Date(Number(v));
