import type { Job } from 'bullmq';
import type { IntentTx } from '../intents/executor.js';
import type { EnqueueOptions } from '../operation/enqueue-types.js';
import type { ResolvingOperation } from '../operation/resolved-result.js';
import type { SealedResult } from '../sealing/sealed-result.js';

/**
 * What the runtime's methods take and return beside an operation: the processor `idem.processor()`
 * gives, what names a queue, `enqueue`'s options, a resolution and who acts. Apart from the
 * runtime (create-idempotency.ts) so the parts it delegates to (enqueueing, operator actions)
 * share these without importing the class.
 */

/** The BullMQ processor `idem.processor()` returns: three parameters, so BullMQ passes its AbortSignal. */
export type IdempotentBullProcessor<R, P extends string> = (
  job: Job,
  token?: string,
  signal?: AbortSignal,
) => Promise<SealedResult<R, P>>;

/** What names an operation's queue: any defined operation. */
export type QueuedOperation = { readonly name: string; readonly definition: { readonly queue?: string | undefined } };

/**
 * What `idem.enqueue` takes: the producer's options (the keyring is the runtime's), and where the
 * intent is recorded (docs/intents.md).
 */
export type RuntimeEnqueueOptions = Omit<EnqueueOptions, 'keyring' | 'durable'> & {
  /**
   * Records the intent in the runtime's Postgres, then adds the job at once.
   * @defaultValue the runtime's `intents.durable`
   */
  durable?: boolean;
  /**
   * Records the intent in the caller's transaction only (a `pg` client inside `BEGIN`, or a
   * kysely `Transaction`): the job is added by a relay after the commit, never for a rollback.
   */
  tx?: IntentTx;
};

/**
 * What `idem.resolve` takes: what became of the key's side effect; with `committed`, the result a
 * replay returns, and optionally the key's operation (else the runtime's own of that name).
 */
export type RuntimeResolveOutcome =
  | { committed: true; result: unknown; operation?: ResolvingOperation }
  | { committed: false };

/** Who performs an operator action, and why (kept in the ledger's record and in its `user` audit event). */
export type OperatorOptions = { actor: string; reason: string };
