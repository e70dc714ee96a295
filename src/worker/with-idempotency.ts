import type { Job } from 'bullmq';
import type { z } from 'zod';
import { ObservedLedger, observedSink } from '../observability/observed.js';
import { runPhase } from '../observability/observer.js';
import type { Operation } from '../operation/operation.js';
import type { SealedResult } from '../sealing/sealed-result.js';
import { AttemptRunner } from './attempt-runner.js';
import { identifiersOf } from './runner-settings.js';
import type { IdempotentProcessor, WithIdempotencyOptions } from './types.js';

/** The processor, ledger and audit sink as an observer sees them (unchanged without one). */
function observed<I, R, DB>(
  operation: string,
  processor: IdempotentProcessor<I, R, DB>,
  options: WithIdempotencyOptions<DB>,
): [IdempotentProcessor<I, R, DB>, WithIdempotencyOptions<DB>] {
  const { observer } = options;
  if (!observer) return [processor, options];
  const ids = identifiersOf(options as WithIdempotencyOptions<unknown>);
  const run: IdempotentProcessor<I, R, DB> = (input, ctx) =>
    runPhase(
      observer,
      'run',
      {
        operation,
        key: ctx.idempotencyKey,
        epoch: ctx.epoch,
        attemptsMade: ctx.attemptsMade,
        queue: ctx.job.queueName,
        ...(ctx.job.id ? { jobId: ids('jobId', ctx.job.id, { operationId: ctx.idempotencyKey }) } : {}),
      },
      () => processor(input, ctx),
    );
  return [
    run,
    {
      ...options,
      ledger: new ObservedLedger(options.ledger, operation, observer),
      audit: observedSink(options.audit, observer),
    },
  ];
}

/**
 * Wraps a processor so each intended operation takes effect at most once, whatever BullMQ
 * re-runs: retries, stalls, operator replays, duplicate adds. Returns a BullMQ processor
 * declared with three parameters, so BullMQ passes its AbortSignal.
 *
 * What the processor returns is recorded exactly and sealed; BullMQ gets (and every replay
 * returns) a {@link SealedResult}: the operation's `publicResult` fields in clear and the whole
 * value sealed. `unseal(job.returnvalue, keyring)` gives back exactly what the processor returned.
 *
 * @example
 * const worker = new Worker('assets', withIdempotency(createAsset, async (input, ctx) => {
 *   const res = await api.createAsset(input, { idempotencyKey: ctx.idempotencyKey, signal: ctx.signal });
 *   return { assetId: res.id };
 * }, { ledger, keyring }), { connection });
 */
export function withIdempotency<S extends z.ZodType, R, P extends string, DB = unknown>(
  operation: Operation<S, R, P>,
  processor: IdempotentProcessor<z.output<S>, R, DB>,
  options: WithIdempotencyOptions<DB>,
): (job: Job, token?: string, signal?: AbortSignal) => Promise<SealedResult<R, P>> {
  const runner = new AttemptRunner(operation as unknown as Operation, ...observed(operation.name, processor, options));
  // Three declared parameters: BullMQ passes the signal only when processor.length >= 3.
  return function idempotentProcessor(job: Job, token?: string, signal?: AbortSignal): Promise<SealedResult<R, P>> {
    return runner.run(job, token, signal) as Promise<SealedResult<R, P>>;
  };
}
