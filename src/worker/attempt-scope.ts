import type { Job } from 'bullmq';
import type { IdempotencyKey } from '../keys/idempotency-key.js';

/** BullMQ's counters of a job as the attempt started; every event of the attempt carries them. */
export type AttemptFacts = { attemptsMade: number; attemptsStarted: number; stalledCounter: number };

/**
 * What one claim is about: the job, the key claimed and, for a step, the operation it belongs to.
 * The operation's scope and each of its steps' scopes share the job, token and facts.
 */
export type AttemptScope = {
  job: Job;
  token: string | undefined;
  key: IdempotencyKey;
  /** The bounded key string of `key`. */
  k: string;
  taskId: string | undefined;
  facts: AttemptFacts;
  /** For a step: the operation's bounded key. */
  parentK?: string;
  /** For a step: its name. */
  stepId?: string;
};

/** Enough of a scope to report an event before the key is known (a job refused at parse). */
export type EventScope = Pick<AttemptScope, 'job' | 'facts'> & Partial<AttemptScope>;

/** The counters BullMQ set on `job` for this attempt. */
export function factsOf(job: Job): AttemptFacts {
  return {
    attemptsMade: job.attemptsMade ?? 0,
    attemptsStarted: job.attemptsStarted ?? 0,
    stalledCounter: job.stalledCounter ?? 0,
  };
}
