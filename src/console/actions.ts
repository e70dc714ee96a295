import { decryptEvent } from '../audit/decrypt-event.js';
import { invalidateKey, type OperatorActionResult, resolveKey } from '../audit/operator-actions.js';
import { answerConfirmation } from '../confirm/answer.js';
import { ConfirmationStore } from '../confirm/confirmation-store.js';
import { IllegalTransitionError } from '../errors/errors.js';
import { ERROR_CODES, isIdempotencyError } from '../errors/idempotency-error.js';
import type { LedgerRecord } from '../ledger/types.js';
import { jobIdFor } from '../operation/enqueue.js';
import { type RerunOutcome, rerun } from '../operation/rerun.js';
import { resolvedResult } from '../operation/resolved-result.js';
import { type OpenedValues, openRecordParts } from '../sealing/open-record.js';
import { mayAnswer, type Operator } from '../shared/operators.js';
import type { ConsoleDeps } from './deps.js';

/** Stable codes of the console's own refusals (the library's errors keep their `IDEMPOTENCY_*` codes). */
export const CONSOLE_CODES = {
  /** No session, or it ended (401). */
  unauthorized: 'UNAUTHORIZED',
  /** The operation belongs to a namespace the operator may not act on (403). */
  namespaceNotAllowed: 'NAMESPACE_NOT_ALLOWED',
  /** The operator may not open sealed values (403). */
  decryptNotAllowed: 'DECRYPT_NOT_ALLOWED',
  /** A missing or wrong anti-forgery token, or a request from another origin (403). */
  forgery: 'FORGED_REQUEST',
  notFound: 'NOT_FOUND',
  badRequest: 'BAD_REQUEST',
  /** The audit event of an opening of sealed values was refused: nothing is shown (500). */
  openingNotAudited: 'OPENING_NOT_AUDITED',
} as const;

/**
 * An action the console refuses, with its HTTP status and code; the message is shown to the
 * operator. An answer of the console's handler, caught there: never thrown out of it.
 */
export class ConsoleRefusal extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

const STATUS_OF: Record<string, number> = {
  [ERROR_CODES.confirmationNotFound]: 404,
  [ERROR_CODES.confirmationAnswered]: 409,
  [ERROR_CODES.confirmationTimedOut]: 410,
  [ERROR_CODES.invalidInput]: 400,
  [ERROR_CODES.illegalTransition]: 409,
  [ERROR_CODES.config]: 400,
};

/** A library error as the console's refusal (its code kept), or the error itself. */
export function asRefusal(err: unknown): unknown {
  if (isIdempotencyError(err) && STATUS_OF[err.code]) {
    return new ConsoleRefusal(STATUS_OF[err.code] as number, err.code, err.message);
  }
  return err;
}

/** The form of an action, as posted. */
export type ActionForm = Record<string, string | undefined>;

/** What an action did: the message for the operator, and the operation page to show after it. */
export type ActionOutcome = { message: string; key: string };

function required(form: ActionForm, name: string, what: string): string {
  const v = form[name]?.trim();
  if (!v) throw new ConsoleRefusal(400, CONSOLE_CODES.badRequest, `${what} is required`);
  return v;
}

/** The record of `key`, when the operator may act on it: 404 when absent, 403 outside its namespaces. */
export async function recordFor(deps: ConsoleDeps, operator: Operator, key: string): Promise<LedgerRecord> {
  const record = await deps.ledger.get(key);
  if (!record) throw new ConsoleRefusal(404, CONSOLE_CODES.notFound, 'no ledger record for this key');
  if (!mayAnswer(operator, record.key)) throw outsideScope(operator);
  return record;
}

export function outsideScope(operator: Operator): ConsoleRefusal {
  return new ConsoleRefusal(
    403,
    CONSOLE_CODES.namespaceNotAllowed,
    `this operation belongs to a namespace ${operator.actor} may not act on`,
  );
}

const by = (deps: ConsoleDeps, operator: Operator, form: ActionForm) => ({
  actor: operator.actor,
  reason: required(form, 'reason', 'a reason'),
  store: deps.store,
  via: 'console' as const,
});

function eventLine(r: OperatorActionResult): string {
  return r.stored
    ? `audit event ${r.event.eventId}`
    : 'its audit event is written by the next backfill (the ledger recorded who and why)';
}

function describeRerun(queue: string, r: RerunOutcome): string {
  switch (r.kind) {
    case 'retried':
      return `job ${r.jobId} in queue ${queue} was ${r.from}, now waiting again`;
    case 'pending':
      return `job ${r.jobId} in queue ${queue} is ${r.state}: nothing to retry, it claims the key when processed`;
    case 'gone':
      return `job ${r.jobId} is no longer in queue ${queue}: enqueue the operation again`;
  }
}

async function rerunOf(deps: ConsoleDeps, record: LedgerRecord): Promise<string> {
  if (!record.queue) throw new ConsoleRefusal(400, CONSOLE_CODES.badRequest, 'the record names no queue to re-run in');
  const r = await rerun(deps.queue(record.queue), record.key, { jobId: record.jobId ?? jobIdFor(record.key) });
  return describeRerun(record.queue, r);
}

/** Answers a confirmation request through `answerConfirmation`, as the operator of the session. */
async function answer(deps: ConsoleDeps, operator: Operator, form: ActionForm): Promise<ActionOutcome> {
  const id = required(form, 'id', 'the request id');
  if (!/^cf-[0-9]+$/.test(id)) throw new ConsoleRefusal(400, CONSOLE_CODES.badRequest, 'not a request id');
  const decision = form.decision;
  if (decision !== 'approve' && decision !== 'deny') {
    throw new ConsoleRefusal(400, CONSOLE_CODES.badRequest, 'the decision is approve or deny');
  }
  const current = await new ConfirmationStore(deps.pool, deps.schema).get(id);
  if (!mayAnswer(operator, current.operationKey)) throw outsideScope(operator);
  const r = await answerConfirmation({
    pool: deps.pool,
    schema: deps.schema,
    auditStore: deps.store,
    policy: deps.policy,
    queue: deps.queue,
    id,
    approve: decision === 'approve',
    actor: operator.actor,
    comment: required(form, 'reason', 'a reason'),
    via: 'console',
  });
  const what = decision === 'approve' ? 'approved' : 'denied';
  return {
    key: current.operationKey,
    message: r.recorded
      ? `${id} ${what} (audit event ${r.auditEventId}); ${r.woken} waiting job(s) woken`
      : `${id} was already ${what}: nothing changed`,
  };
}

async function resolveCommitted(deps: ConsoleDeps, operator: Operator, form: ActionForm): Promise<ActionOutcome> {
  const record = await recordFor(deps, operator, required(form, 'key', 'the operation key'));
  const text = required(form, 'result', 'the result');
  const keyring = deps.keyring;
  if (!keyring) {
    throw new ConsoleRefusal(400, ERROR_CODES.config, 'the process has no BQI_KEYRING: a result cannot be sealed');
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    // Never quoted: it may be what the key must keep.
    throw new ConsoleRefusal(400, ERROR_CODES.invalidInput, `the result is not JSON (${text.length} characters)`);
  }
  // Checked and sealed as the operation's own completion would (its schema, its public fields).
  const sealed = resolvedResult(record, value, keyring, { operation: deps.operations.get(record.operation) });
  const r = await settle(() =>
    resolveKey(deps.ledger, record.key, { committed: true, result: sealed }, by(deps, operator, form)),
  );
  return { key: record.key, message: `resolved as committed: completed at epoch ${r.epoch}; ${eventLine(r)}` };
}

async function resolveNotCommitted(deps: ConsoleDeps, operator: Operator, form: ActionForm): Promise<ActionOutcome> {
  const record = await recordFor(deps, operator, required(form, 'key', 'the operation key'));
  const r = await settle(() => resolveKey(deps.ledger, record.key, { committed: false }, by(deps, operator, form)));
  return { key: record.key, message: `resolved as not committed: released at epoch ${r.epoch}; ${eventLine(r)}` };
}

/** A resolve of a record that is no longer unknown says what it is now. */
async function settle<T>(act: () => Promise<T>): Promise<T> {
  try {
    return await act();
  } catch (err) {
    if (err instanceof IllegalTransitionError && err.details.from !== null) {
      throw new ConsoleRefusal(409, err.code, `it is ${err.details.from} now, not unknown: nothing was changed`);
    }
    throw err;
  }
}

async function invalidate(deps: ConsoleDeps, operator: Operator, form: ActionForm): Promise<ActionOutcome> {
  const record = await recordFor(deps, operator, required(form, 'key', 'the operation key'));
  const r = await invalidateKey(deps.ledger, record.key, by(deps, operator, form));
  const again = form.rerun === 'yes' ? `; ${await rerunOf(deps, record)}` : '';
  return {
    key: record.key,
    message: `invalidated: was ${r.previousStatus}, now invalidated at epoch ${r.epoch}; ${eventLine(r)}${again}`,
  };
}

async function rerunAction(deps: ConsoleDeps, operator: Operator, form: ActionForm): Promise<ActionOutcome> {
  const record = await recordFor(deps, operator, required(form, 'key', 'the operation key'));
  required(form, 'reason', 'a reason');
  return { key: record.key, message: `re-run: ${await rerunOf(deps, record)}` };
}

/** The console's actions, by the form's `action`: each one a library function, as the operator of the session. */
export const ACTIONS: Record<
  string,
  (deps: ConsoleDeps, operator: Operator, form: ActionForm) => Promise<ActionOutcome>
> = {
  answer,
  'resolve-committed': resolveCommitted,
  'resolve-not-committed': resolveNotCommitted,
  invalidate,
  rerun: rerunAction,
};

/**
 * Opens the sealed values of a record for an operator allowed to (`decrypt`), after writing the
 * `operator.decrypt` event as `inspect --decrypt` does: no event stored, nothing shown.
 */
export async function openSealed(
  deps: ConsoleDeps,
  operator: Operator,
  form: ActionForm,
): Promise<{ record: LedgerRecord; opened: OpenedValues; eventId: string }> {
  const record = await recordFor(deps, operator, required(form, 'key', 'the operation key'));
  if (!deps.decrypt.has(operator.actor) || !deps.keyring) {
    throw new ConsoleRefusal(403, CONSOLE_CODES.decryptNotAllowed, `${operator.actor} may not open sealed values here`);
  }
  const opening = openRecordParts(record, deps.keyring, (err, part) => {
    throw new ConsoleRefusal(400, err.code, `the sealed ${part} cannot be opened (${err.code}); nothing was shown`);
  });
  const event = decryptEvent({
    record,
    actorId: operator.actor,
    reason: required(form, 'reason', 'a reason'),
    opened: opening.parts,
    keyIds: opening.keyIds,
    via: 'console',
  });
  const written = await deps.store.writeBatch([event]);
  if (written.deadLettered > 0) {
    throw new ConsoleRefusal(
      500,
      CONSOLE_CODES.openingNotAudited,
      'the audit event of this opening was refused; nothing was shown',
    );
  }
  return { record, opened: opening.opened, eventId: event.eventId };
}
