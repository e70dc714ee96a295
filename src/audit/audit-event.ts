import { z } from 'zod';
import { sha256 } from '../fingerprint/sha256.js';

/** What a redaction receipt says: which rules changed what, never the values. */
export const redactionReceiptSchema = z
  .object({
    policyVersion: z.string(),
    rules: z.array(z.string()),
    paths: z.array(z.string()),
    counts: z.record(z.string(), z.number()),
  })
  .passthrough();

const id = (max: number) => z.string().min(1).max(max);

/**
 * An audit event: the seed's fields (eventId … createdAt) plus what reconstruction needs
 * (operation, phase, epoch, attempt facts, job, sequence, redaction receipt). Unknown fields are
 * refused. `details` has been redacted and allow-listed before it gets here.
 */
export const auditEventSchema = z
  .object({
    eventId: id(64),
    taskId: id(200).optional(),
    stepId: id(200).optional(),
    operationId: id(255).optional(),
    actorType: z.enum(['system', 'user', 'agent']),
    actorId: id(200),
    action: id(100),
    resourceType: id(100),
    resourceId: id(255),
    decision: z.enum(['allow', 'deny', 'pending_confirmation']),
    reasonCode: id(100).optional(),
    beforeStateRef: id(255).optional(),
    afterStateRef: id(255).optional(),
    createdAt: z.iso.datetime({ offset: true }),
    seq: z.number().int().min(0).optional(),
    operation: id(200).optional(),
    phase: z.enum(['intent', 'outcome']),
    epoch: z.number().int().positive().optional(),
    jobId: id(255).optional(),
    queue: id(200).optional(),
    attemptsMade: z.number().int().min(0).optional(),
    attemptsStarted: z.number().int().min(0).optional(),
    stalledCounter: z.number().int().min(0).optional(),
    details: z.record(z.string(), z.unknown()).optional(),
    redaction: redactionReceiptSchema.optional(),
  })
  .strict();

export type AuditEvent = z.infer<typeof auditEventSchema>;

/**
 * Deterministic event id: the same transition (key, epoch, transition, sequence) always gets the
 * same id, so a re-emit, a redelivered audit job and a backfill can never write it twice.
 */
export function eventIdFor(...parts: (string | number | undefined)[]): string {
  // One update of the whole text (each part followed by NUL): the same bytes, and so the same
  // id, as hashing part by part, without a native call per part.
  let text = '';
  for (const p of parts) text += `${p ?? ''}\u0000`;
  return sha256(text, 'base64url').slice(0, 32);
}
