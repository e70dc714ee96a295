import { randomBytes } from 'node:crypto';
import type { Queue } from 'bullmq';
import type pg from 'pg';
import { z } from 'zod';
import { AuditEmitter, auditRedactor, DEFAULT_AUDIT_QUEUE } from '../src/entries/audit.js';
import { defineRedactionPolicy } from '../src/entries/redaction.js';
import {
  ConfirmationDeniedError,
  defineKeyring,
  defineOperation,
  type Keyring,
  type ProcessorContext,
  parseKeyringSpec,
  RetryableError,
} from '../src/index.js';
import { postEffect } from '../src/testing/index.js';

/** Short lock and stall timings so a killed worker's job is redelivered within seconds. */
export const DEMO_WORKER_TIMING = { lockDuration: 2_000, stalledInterval: 1_000, maxStalledCount: 1 };

/** The task whose audit trail the demo prints: the charge whose worker is killed. */
export const DEMO_TASK = 'task-42';

/** The task of the large charge that waits for a person's yes. */
export const DEMO_CONFIRM_TASK = 'task-43';

/** The audit queue under the demo's prefix: the CLI's default `BQI_AUDIT_QUEUE`. */
export const DEMO_AUDIT_QUEUE = DEFAULT_AUDIT_QUEUE;

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

/** Nothing was committed: BullMQ retries with the same key. Its code is what the audit trail shows. */
export class DownstreamUnavailableError extends RetryableError {
  constructor(status: number) {
    super(`downstream answered ${status}`, { code: 'DOWNSTREAM_UNAVAILABLE' });
  }
}

export type ChargeOperation = ReturnType<typeof chargeOperation>;
export type ChargeInput = { order: string; amount: number };
export type ChargeResult = { chargeId: string; receiptToken?: string };

/**
 * The charge processor: one POST to the downstream with the operation key. A 5xx says nothing
 * was committed (RetryableError: BullMQ retries with the same key). With `decide`, the attempt
 * first records its tool decision in the audit trail and waits until it is durable.
 */
export function chargeProcessor(downstreamUrl: string, decide = false, onCommitted?: () => Promise<never>) {
  return async (input: ChargeInput, ctx: ProcessorContext): Promise<ChargeResult> => {
    if (decide) await ctx.audit({ action: 'tool.charge_card', decision: 'allow', reasonCode: 'AMOUNT_WITHIN_LIMIT' });
    const res = await postEffect<{ id: string }>(downstreamUrl, input, ctx.idempotencyKey, ctx.signal);
    if (res.status >= 500) throw new DownstreamUnavailableError(res.status);
    if (onCommitted) return onCommitted();
    return { chargeId: res.body.id };
  };
}

/** Charges from this amount (in cents) wait for a person's yes before they run. */
export const CONFIRM_FROM_CENTS = 100_000;

/**
 * The charge processor for large amounts: from {@link CONFIRM_FROM_CENTS} it asks a person
 * first (`ctx.confirm`), and charges only after a yes; a no is a recorded failure.
 */
export function confirmedChargeProcessor(downstreamUrl: string) {
  const charge = chargeProcessor(downstreamUrl);
  return async (input: ChargeInput, ctx: ProcessorContext): Promise<ChargeResult> => {
    if (input.amount >= CONFIRM_FROM_CENTS) {
      const answer = await ctx.confirm({
        name: 'large-charge',
        reason: `charge ${input.amount} cents for order ${input.order}`,
        timeout: '10m',
        onTimeout: 'deny',
      });
      if (!answer.approved) throw new ConfirmationDeniedError(answer);
    }
    return charge(input, ctx);
  };
}

/** An audit emitter on the demo's audit queue, with refs keyed from the demo's keyring. */
export function demoAuditEmitter(queue: Queue, pool: pg.Pool, schema: string, keyring: Keyring, actorId: string) {
  const policy = demoPolicy(keyring);
  return new AuditEmitter({ queue, pool, schema, redact: auditRedactor(policy), redactionPolicy: policy, actorId });
}

/** The demo's redaction policy: refs keyed from its keyring, so the emitters', the writer's and the CLI's match. */
export function demoPolicy(keyring: Keyring) {
  return defineRedactionPolicy({ version: 'demo-1', hmacKeys: keyring.refKeys() });
}
