import { z } from 'zod';
import { defineOperation } from '../src/index.js';

/** Short lock and stall timings so a killed worker's job is redelivered within seconds. */
export const DEMO_WORKER_TIMING = { lockDuration: 2_000, stalledInterval: 1_000, maxStalledCount: 1 };

/** The demo's side effect: charge an order (the downstream commits one "charge" per call). */
export function chargeOperation(downstream: 'idempotent' | 'none') {
  return defineOperation({
    name: 'payments.charge',
    namespace: `demo/payments.charge/${downstream}`,
    version: 'v1',
    input: z.object({ order: z.string(), amount: z.number().int().positive(), note: z.string().optional() }),
    // The note is tracing data: it is not part of what the charge does, so not of the fingerprint.
    effect: (i) => ({ order: i.order, amount: i.amount }),
    resourceKey: (i) => `order:${i.order}`,
    retention: '1h',
    lease: '1s',
    downstream,
  });
}
