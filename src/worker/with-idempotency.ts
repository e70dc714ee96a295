import type { Job } from 'bullmq';
import type { z } from 'zod';
import type { Operation } from '../operation/define-operation.js';
import { AttemptRunner, type IdempotentProcessor } from './attempt.js';
import type { WithIdempotencyOptions } from './types.js';

/**
 * Wraps a processor so each intended operation takes effect at most once, whatever BullMQ
 * re-runs: retries, stalls, operator replays, duplicate adds. Returns a BullMQ processor
 * declared with three parameters, so BullMQ passes its AbortSignal.
 *
 * @example
 * const worker = new Worker('assets', withIdempotency(createAsset, async (input, ctx) => {
 *   const res = await api.createAsset(input, { idempotencyKey: ctx.idempotencyKey, signal: ctx.signal });
 *   return { assetId: res.id };
 * }, { ledger }), { connection });
 */
export function withIdempotency<S extends z.ZodType, R, DB = unknown>(
  operation: Operation<S, R>,
  processor: IdempotentProcessor<z.output<S>, R, DB>,
  options: WithIdempotencyOptions<DB>,
): (job: Job, token?: string, signal?: AbortSignal) => Promise<R> {
  const runner = new AttemptRunner(operation as unknown as Operation, processor, options);
  // Three declared parameters: BullMQ passes the signal only when processor.length >= 3.
  return function idempotentProcessor(job: Job, token?: string, signal?: AbortSignal): Promise<R> {
    return runner.run(job, token, signal) as Promise<R>;
  };
}
