import { randomBytes } from 'node:crypto';
import { z } from 'zod';
import { defineKeyring, defineOperation, type Keyring, parseKeyringSpec } from '../src/index.js';

/** Short lock and stall timings so a killed worker's job is redelivered within seconds. */
export const DEMO_WORKER_TIMING = { lockDuration: 2_000, stalledInterval: 1_000, maxStalledCount: 1 };

/**
 * The demo's keyring: `BQI_KEYRING` when set (the demo's worker process gets it that way), else a
 * fresh random key for this run.
 */
export function demoKeyring(): Keyring {
  const spec = process.env.BQI_KEYRING;
  return spec ? parseKeyringSpec(spec) : defineKeyring({ keys: [{ id: 'demo', secret: randomBytes(32) }] });
}

/**
 * The demo's side effect: charge an order (the downstream commits one "charge" per call). The
 * charge id may be shown in clear; the receipt token the charge returns is kept only sealed.
 */
export function chargeOperation(downstream: 'idempotent' | 'none') {
  return defineOperation({
    name: 'payments.charge',
    namespace: `demo/payments.charge/${downstream}`,
    version: 'v1',
    input: z.object({ order: z.string(), amount: z.number().int().positive(), note: z.string().optional() }),
    // The note is tracing data: it is not part of what the charge does, so not of the fingerprint.
    effect: (i) => ({ order: i.order, amount: i.amount }),
    resourceKey: (i) => `order:${i.order}`,
    result: z.object({ chargeId: z.string(), receiptToken: z.string().optional() }),
    publicResult: ['chargeId'],
    retention: '1h',
    lease: '1s',
    downstream,
  });
}
