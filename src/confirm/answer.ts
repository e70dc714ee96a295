import type { Queue } from 'bullmq';
import type pg from 'pg';
import type { AuditEvent } from '../audit/audit-event.js';
import { AuditStore } from '../audit/audit-store.js';
import { CONFIRMATION_APPROVED, confirmationEvent } from '../audit/confirmation-event.js';
import { DEFAULT_SCHEMA } from '../db/connection.js';
import { InvalidInputError } from '../errors/errors.js';
import { ERROR_CODES } from '../errors/idempotency-error.js';
import { cleanReason } from '../redaction/clean-reason.js';
import { DEFAULT_REDACTION_POLICY, type RedactionPolicy } from '../redaction/define-policy.js';
import { actorIdAsTold } from './actor-id.js';
import { ConfirmationStore } from './confirmation-store.js';
import { ConfirmationAnsweredError, ConfirmationTimedOutError } from './errors.js';
import type { Confirmation } from './types.js';

// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what is refused
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;
const MAX_ACTOR = 200;

/** Where confirmations are stored; `pool` and `schema` of the ledger. */
export type ConfirmationsOptions = {
  pool: pg.Pool;
  /** @defaultValue `'public'` */
  schema?: string;
};

export type AnswerConfirmationOptions = ConfirmationsOptions & {
  /** `cf-<n>`, as `confirmations list` shows it. */
  id: string;
  approve: boolean;
  /**
   * Who answers (actor type `user`). Kept in the request (`answered_by`) and in the audit event
   * as the trail tells an actor: in clear when it is an identifier, else as a keyed reference of
   * `policy` (see `actorIdAsTold`). Taken as given: the caller vouches for it (the HTTP endpoint
   * takes it from the operator's token, the CLI from `--actor`).
   */
  actor: string;
  /**
   * The policy whose keys make the actor's reference: the one of `auditStore` (the emitters'),
   * so the request and its audit event hold the same reference.
   * @defaultValue DEFAULT_REDACTION_POLICY (a per-process key: references that join nothing)
   */
  policy?: RedactionPolicy;
  /** Why: one line, scanned by the default redaction policy, at most 500 characters. */
  comment?: string;
  /** Where the answer's audit event is written. @defaultValue an AuditStore on `pool` with the default policy */
  auditStore?: AuditStore;
  /** How the answer reached the library (`cli`, `http`...), kept in the audit event. */
  via?: string;
  /**
   * Opens the BullMQ queue of a waiting job, so the answer wakes it at once (`job.promote()`).
   * Without it, a parked job finds the answer at its next re-check.
   */
  queue?: (name: string) => Queue | Promise<Queue>;
};

/** The outcome of an answer: the stored request, whether this call recorded it, the audit event id and the jobs woken. */
export type AnswerResult = {
  confirmation: Confirmation;
  /** False when the same answer was already recorded (nothing changed). */
  recorded: boolean;
  auditEventId: string;
  /** Parked jobs this call promoted. */
  woken: number;
};

/**
 * Records a person's answer to a confirmation request, once: the same answer again changes
 * nothing; a different one is refused ({@link ConfirmationAnsweredError},
 * `IDEMPOTENCY_CONFIRMATION_ANSWERED`); an answer after the timeout is refused
 * ({@link ConfirmationTimedOutError}) and the timeout is recorded. The answer is audited as a
 * `user` decision, written to `audit_events` before the call returns (the worker tells the same
 * event, by the same id, when it reads the answer), and the waiting jobs are woken.
 *
 * @example
 * await answerConfirmation({ pool, id: 'cf-12', approve: true, actor: 'alice', comment: 'checked the invoice',
 *   queue: (name) => new Queue(name, { connection }) });
 */
export async function answerConfirmation(opts: AnswerConfirmationOptions): Promise<AnswerResult> {
  const actor = typeof opts.actor === 'string' ? opts.actor.trim() : '';
  if (actor.length === 0 || actor.length > MAX_ACTOR || CONTROL.test(actor)) {
    throw new InvalidInputError('confirmation answer', [
      { path: 'actor', message: `1 to ${MAX_ACTOR} printable characters`, code: 'invalid_actor' },
    ]);
  }
  const schema = opts.schema ?? DEFAULT_SCHEMA;
  const store = new ConfirmationStore(opts.pool, schema);
  const answeredBy = actorIdAsTold(actor, opts.policy ?? DEFAULT_REDACTION_POLICY);
  const status = opts.approve ? 'approved' : 'denied';
  const comment = opts.comment === undefined || opts.comment.trim() === '' ? null : cleanReason(opts.comment);
  const code = opts.approve ? CONFIRMATION_APPROVED : ERROR_CODES.confirmationDenied;
  let c = await store.answer(opts.id, status, answeredBy, code, comment);
  const recorded = c !== undefined;
  if (!c) {
    c = await store.get(opts.id);
    if (c.overdue) c = (await store.timeout(c.id, ERROR_CODES.confirmationTimedOut)) ?? (await store.get(c.id));
    if (c.status === 'timed_out') {
      await writeEvent(opts, schema, confirmationEvent('timedOut', c));
      await wake(c, opts.queue);
      throw new ConfirmationTimedOutError({ id: c.id, expiresAt: c.expiresAt, onTimeout: c.onTimeout });
    }
    if (c.status !== status) {
      throw new ConfirmationAnsweredError({
        id: c.id,
        status: c.status,
        answeredBy: c.answeredBy,
        answeredAt: c.answeredAt,
      });
    }
  }
  const event = confirmationEvent('answered', c, opts.via);
  await writeEvent(opts, schema, event);
  return { confirmation: c, recorded, auditEventId: event.eventId, woken: await wake(c, opts.queue) };
}

async function writeEvent(opts: AnswerConfirmationOptions, schema: string, event: AuditEvent): Promise<void> {
  const store = opts.auditStore ?? new AuditStore(opts.pool, schema, opts.policy);
  const r = await store.writeBatch([event]);
  if (r.deadLettered > 0) throw new Error(`the audit event ${event.eventId} was refused and dead-lettered`);
}

/** Promotes the parked jobs of a settled request; a job that is not delayed (running, gone) is left alone. */
export async function wake(c: Confirmation, queue: AnswerConfirmationOptions['queue']): Promise<number> {
  if (!queue) return 0;
  let woken = 0;
  for (const w of c.waiters) {
    try {
      const q = await queue(w.queue);
      const job = await q.getJob(w.jobId);
      if (job && (await job.isDelayed())) {
        await job.promote();
        woken++;
      }
    } catch {
      // not delayed any more (it runs, or it was promoted by another answer): it reads the answer itself
    }
  }
  return woken;
}

/**
 * Confirmation requests, in id order: all, or only those waiting for an answer (`pending`).
 * Sealed details stay sealed; `overdue` marks a pending request whose time has run out (the next
 * look at it, by its job or an answer, records the timeout).
 *
 * @example
 * for (const c of await listConfirmations({ pool, pending: true })) console.log(c.id, c.operation, c.reason);
 */
export async function listConfirmations(
  opts: ConfirmationsOptions & { pending?: boolean; limit?: number; after?: string },
): Promise<Confirmation[]> {
  return new ConfirmationStore(opts.pool, opts.schema).list(opts);
}
