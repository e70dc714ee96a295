import type { Queue } from 'bullmq';
import { JobFailedError, ResultTimeoutError } from '../errors/errors.js';
import type { Keyring } from '../sealing/keyring.js';
import { isSealedResult, unseal } from '../sealing/sealed-result.js';

/** How long `idem.result()` waits by default. */
export const DEFAULT_RESULT_TIMEOUT_MS = 30_000;

/** A code at the start of a failedReason (`IDEMPOTENCY_CONFLICT (…): …`, `CARD_DECLINED: …`). */
const LEADING_CODE = /^([A-Z][A-Z0-9_]{2,99})\b/;

/**
 * Waits until job `jobId` of `queue` has finished and returns its result as the processor returned
 * it (opened when BullMQ holds it sealed). It reads the job's state, first often, then every 250 ms
 * at most: no listener to set up before the job can finish, and the same on any BullMQ backend.
 * @throws JobFailedError when the job failed (its last attempt), ResultTimeoutError after `timeoutMs`
 */
export async function waitForResult<R>(queue: Queue, jobId: string, keyring: Keyring, timeoutMs: number): Promise<R> {
  const deadline = Date.now() + timeoutMs;
  let pause = 10;
  for (;;) {
    const state = await queue.getJobState(jobId);
    if (state === 'completed' || state === 'failed') {
      const job = await queue.getJob(jobId);
      if (state === 'completed') {
        const value = job?.returnvalue;
        return (isSealedResult(value) ? unseal(value, keyring) : value) as R;
      }
      const reason = job?.failedReason ?? '';
      throw new JobFailedError(reason, {
        queue: queue.name,
        jobId,
        attemptsMade: job?.attemptsMade ?? 0,
        reasonCode: LEADING_CODE.exec(reason)?.[1] ?? null,
      });
    }
    if (Date.now() >= deadline) throw new ResultTimeoutError({ queue: queue.name, jobId, state, timeoutMs });
    await new Promise((r) => setTimeout(r, Math.min(pause, Math.max(1, deadline - Date.now()))));
    pause = Math.min(250, pause * 2);
  }
}
