import type { Job } from 'bullmq';
import type { IdentifierStorer } from '../audit/stored-identifier.js';
import { IdempotencyConfigError, InvalidInputError } from '../errors/errors.js';
import { ERROR_CODES } from '../errors/idempotency-error.js';
import { RetryableError } from '../errors/processor-errors.js';
import { toMs } from '../operation/duration.js';
import type { Operation } from '../operation/operation.js';
import { assertRetentionCovers } from '../operation/retry-window.js';
import { cleanReason } from '../redaction/clean-reason.js';
import { unrecoverable } from '../sealing/bullmq-errors.js';
import type { Keyring } from '../sealing/keyring.js';
import type { Logger } from '../shared/logger.js';
import type { ConfirmationStore } from './confirmation-store.js';
import { ConfirmationTimeoutFailure } from './errors.js';
import { type ConfirmationEventKind, decisionOf } from './events.js';
import { DEFAULT_RECHECK_MS, MIN_RECHECK_MS, parkJob } from './parked-job.js';
import type { Confirmation, ConfirmationDecision, ConfirmRequest } from './types.js';

const NAME = /^[A-Za-z0-9](?:[A-Za-z0-9._-]{0,98}[A-Za-z0-9])?$/;

/** What `ctx.confirm()` needs from the attempt that calls it. */
export type ConfirmAttempt = {
  op: Operation;
  /** The operation's bounded key. */
  operationKey: string;
  epoch: number;
  job: Job;
  token: string | undefined;
  taskId: string | undefined;
  /** The job's retry window without confirmations, to check a timeout the operation does not bound. */
  retryWindowMs: number;
};

export type ConfirmDeps = {
  store: ConfirmationStore;
  keyring: Keyring;
  /** Sends a confirmation's audit event through the wrapper's sink; resolves when it is durable. */
  emit(kind: ConfirmationEventKind, c: Confirmation): void | Promise<void>;
  logger?: Logger;
  /** The request's name and task id as the audit trail tells identifiers (see `identifierAsStored`). @defaultValue as given */
  ids?: IdentifierStorer;
};

/**
 * `ctx.confirm()`: the answer when there is one; otherwise the request is recorded (once per
 * operation key and name), its `pending_confirmation` event made durable, the job parked as a
 * delayed job (no attempt used) until the answer wakes it or its re-check is due, and BullMQ's
 * `DelayedError` thrown: the wrapper then releases the lease without recording anything.
 */
export async function awaitConfirmation(
  deps: ConfirmDeps,
  a: ConfirmAttempt,
  req: ConfirmRequest,
): Promise<ConfirmationDecision> {
  const checked = checkRequest(a, req);
  const ids = deps.ids ?? ((_field: string, v: string) => v);
  let c: Confirmation = await deps.store.request({
    operationKey: a.operationKey,
    name: ids('stepId', req.name),
    operation: a.op.name,
    reason: checked.reason,
    ...(req.details === undefined
      ? {}
      : {
          details: deps.keyring.seal(req.details, {
            purpose: 'value',
            operation: a.op.name,
            field: `confirm:${req.name}`,
            key: a.operationKey,
          }),
        }),
    onTimeout: req.onTimeout,
    timeoutMs: checked.timeoutMs,
    ...(a.taskId ? { taskId: ids('taskId', a.taskId) } : {}),
    ...(a.job.id ? { jobId: ids('jobId', a.job.id, { operationId: a.operationKey }) } : {}),
    queue: a.job.queueName,
    epoch: a.epoch,
  });
  if (c.overdue) c = (await deps.store.timeout(c.id, ERROR_CODES.confirmationTimedOut)) ?? (await deps.store.get(c.id));
  if (c.status !== 'pending') return settled(deps, c);

  if (a.job.id) await deps.store.addWaiter(c.id, { queue: a.job.queueName, jobId: a.job.id });
  let told = true;
  try {
    await deps.emit('requested', c);
  } catch (err) {
    // The request is in Postgres either way; its event is told again at the next re-check, which
    // runs the processor for that (the job is parked without the mark that lets it skip the claim).
    told = false;
    deps.logger?.warn({ confirmation: c.id, code: (err as { code?: unknown }).code }, 'confirmation event not durable');
  }
  if (!a.token) {
    throw new RetryableError(`waiting for confirmation ${c.id}`, { publicMessage: `waiting for confirmation ${c.id}` });
  }
  return parkJob(deps.store, a.job, a.token, c, checked.recheckMs, { mark: told, logger: deps.logger });
}

/** The decision of a settled request (telling its event again: the trail keeps one row), or the timeout's failure. */
function settled(deps: ConfirmDeps, c: Confirmation): ConfirmationDecision {
  try {
    void Promise.resolve(deps.emit(c.status === 'timed_out' ? 'timedOut' : 'answered', c)).catch(() => {});
  } catch {
    // told by whoever settled it; the trail has it, or the answer path logged why not
  }
  const decision = decisionOf(c);
  if (decision) return decision;
  throw new ConfirmationTimeoutFailure(c.id, c.expiresAt);
}

function checkRequest(
  a: ConfirmAttempt,
  req: ConfirmRequest,
): { reason: string; timeoutMs: number; recheckMs: number } {
  const issues: { path: string; message: string; code: string }[] = [];
  if (typeof req?.name !== 'string' || !NAME.test(req.name)) {
    issues.push({ path: 'name', message: 'letters, digits, ., _ or -, at most 100', code: 'invalid_name' });
  }
  if (typeof req?.reason !== 'string' || req.reason.trim() === '') {
    issues.push({ path: 'reason', message: 'a non-empty string', code: 'invalid_reason' });
  }
  if (req?.onTimeout !== 'deny' && req?.onTimeout !== 'fail') {
    issues.push({ path: 'onTimeout', message: "'deny' or 'fail'", code: 'invalid_enum_value' });
  }
  if (req?.details !== undefined && (typeof req.details !== 'object' || req.details === null)) {
    issues.push({ path: 'details', message: 'an object', code: 'invalid_type' });
  }
  if (issues.length > 0) throw unrecoverable(new InvalidInputError('confirmation request', issues));
  let timeoutMs: number;
  let recheckMs: number;
  try {
    timeoutMs = toMs(req.timeout, 'timeout');
    recheckMs =
      req.recheckEvery === undefined
        ? DEFAULT_RECHECK_MS
        : Math.max(MIN_RECHECK_MS, toMs(req.recheckEvery, 'recheckEvery'));
    const max = a.op.maxConfirmationTimeoutMs;
    if (max !== undefined && timeoutMs > max) {
      throw new IdempotencyConfigError(
        `Operation ${a.op.name}: confirmation ${req.name} asks for a timeout of ${timeoutMs} ms, above the operation's maxConfirmationTimeout of ${max} ms`,
        { option: 'maxConfirmationTimeout', timeoutMs, maxConfirmationTimeoutMs: max },
      );
    }
    // Without a declared bound, this timeout must fit in retention on top of the job's retry path.
    if (max === undefined) assertRetentionCovers(a.op.name, a.op.retentionMs, a.retryWindowMs + timeoutMs);
  } catch (err) {
    throw err instanceof IdempotencyConfigError ? unrecoverable(err) : err;
  }
  return { reason: cleanReason(req.reason), timeoutMs, recheckMs };
}
