import { IdempotencyConfigError, SealError } from '../errors/errors.js';
import { ERROR_CODES } from '../errors/idempotency-error.js';
import type { Keyring } from './keyring.js';
import { isSealed, type Sealed, sealedKeyId } from './sealed-text.js';

/** What sealing needs of an operation: its name and the input fields it declares sensitive. */
type SealingOperation = { readonly name: string; readonly sensitiveInput: readonly string[] };

/**
 * The job input with the operation's `sensitiveInput` fields sealed, each for its operation,
 * field and the bounded key `key` of the job, so Redis never holds them in clear and a sealed
 * field copied into another job, operation or field does not open there. Fails closed: an
 * operation that declares sensitive fields cannot be enqueued without a keyring.
 */
export function sealInput(op: SealingOperation, input: unknown, keyring: Keyring | undefined, key: string): unknown {
  if (op.sensitiveInput.length === 0 || !isRecord(input)) return input;
  if (!keyring) {
    throw new IdempotencyConfigError(
      `Operation ${op.name} declares sensitive input (${op.sensitiveInput.join(', ')}): enqueue it with a keyring`,
      { option: 'keyring' },
    );
  }
  let out: Record<string, unknown> | undefined;
  for (const f of op.sensitiveInput) {
    if (!Object.hasOwn(input, f) || input[f] === undefined) continue;
    out ??= { ...input };
    out[f] = keyring.seal(input[f], { purpose: 'input', operation: op.name, field: f, key });
  }
  return out ?? input;
}

/** Input with its sealed fields opened, and the bounded key every one of them was sealed for. */
export type OpenedInput = { input: unknown; sealedFor: string | undefined };

/**
 * The job input with sealed `sensitiveInput` fields opened, each checked to be sealed for this
 * operation and field; the key they were sealed for is returned, for the caller to check against
 * the job's key once it is known ({@link assertInputKey}). `sealedOnly` (a job the producer
 * helper made, which seals them) refuses a sensitive field in clear; fields in clear in a job
 * added without the helper pass as they are. Throws SealError when a sealed field cannot be
 * opened, was sealed elsewhere, or is in clear where only a seal is accepted.
 */
export function openInput(op: SealingOperation, input: unknown, keyring: Keyring, sealedOnly: boolean): OpenedInput {
  if (op.sensitiveInput.length === 0 || !isRecord(input)) return { input, sealedFor: undefined };
  let out: Record<string, unknown> | undefined;
  let sealedFor: string | undefined;
  for (const f of op.sensitiveInput) {
    const v = Object.hasOwn(input, f) ? input[f] : undefined;
    if (!isSealed(v)) {
      if (sealedOnly && v !== undefined) throw new SealError(ERROR_CODES.sealRequired, { purpose: 'input', field: f });
      continue;
    }
    const opened = keyring.openPlaced(v as Sealed, 'input');
    const mismatch = [
      ...(opened.place.operation === op.name ? [] : ['operation']),
      ...(opened.place.field === f ? [] : ['field']),
      ...(sealedFor === undefined || opened.place.key === sealedFor ? [] : ['key']),
    ];
    if (mismatch.length > 0) {
      throw new SealError(ERROR_CODES.sealMisplaced, { keyId: sealedKeyId(v) ?? null, purpose: 'input', mismatch });
    }
    sealedFor = opened.place.key;
    out ??= { ...input };
    out[f] = opened.value;
  }
  return { input: out ?? input, sealedFor };
}

/** Refuses input sealed for another key than the job's (`IDEMPOTENCY_SEAL_MISPLACED`). */
export function assertInputKey(opened: OpenedInput, key: string): void {
  if (opened.sealedFor !== undefined && opened.sealedFor !== key) {
    throw new SealError(ERROR_CODES.sealMisplaced, { keyId: null, purpose: 'input', mismatch: ['key'] });
  }
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
