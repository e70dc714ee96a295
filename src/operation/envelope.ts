import { z } from 'zod';
import { idempotencyKeySchema, isWellFormedKey, ownFieldCount } from '../keys/idempotency-key.js';

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

/** A text field `metaSchema` bounds to 1..200: counted in UTF-16 code units, never fewer than code points. */
const isName = (s: unknown): s is string => typeof s === 'string' && s.length >= 1 && s.length <= 200;

/**
 * A well-formed envelope read without zod (every job of an operation passes here): only what
 * {@link envelopeSchema} accepts, else undefined, and the schema then says what is wrong.
 */
export function readEnvelope(data: unknown): JobEnvelope | undefined {
  if (ownFieldCount(data) !== 2) return undefined;
  const { [ENVELOPE_FIELD]: meta, input } = data as Record<string, unknown>;
  if (!Object.hasOwn(data as object, 'input')) return undefined;
  const fields = ownFieldCount(meta);
  if (fields !== 3 && fields !== 4) return undefined;
  const { v, operation, key, taskId } = meta as Record<string, unknown>;
  if (v !== 1 || !isName(operation) || !isWellFormedKey(key)) return undefined;
  const copy = { namespace: key.namespace, resourceKey: key.resourceKey, version: key.version };
  if (fields === 3) return taskId === undefined ? { [ENVELOPE_FIELD]: { v, operation, key: copy }, input } : undefined;
  return isName(taskId) ? { [ENVELOPE_FIELD]: { v, operation, key: copy, taskId }, input } : undefined;
}
