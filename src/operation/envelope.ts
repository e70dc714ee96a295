import { z } from 'zod';
import { idempotencyKeySchema } from '../keys/idempotency-key.js';

/** The field of `job.data` that carries the operation key made at intent. */
export const ENVELOPE_FIELD = '__idempotency';

const metaSchema = z
  .object({
    v: z.literal(1),
    operation: z.string().min(1).max(200),
    key: idempotencyKeySchema,
    taskId: z.string().min(1).max(200).optional(),
  })
  .strict();

/** What the producer helper puts in `job.data`: the key travels with the input. */
export const envelopeSchema = z.object({ [ENVELOPE_FIELD]: metaSchema, input: z.unknown() }).strict();

export type EnvelopeMeta = z.infer<typeof metaSchema>;
export type JobEnvelope = { [ENVELOPE_FIELD]: EnvelopeMeta; input: unknown };

/** True when job data claims to be an envelope (it may still be malformed). */
export function looksLikeEnvelope(data: unknown): data is Record<string, unknown> {
  return typeof data === 'object' && data !== null && ENVELOPE_FIELD in data;
}
