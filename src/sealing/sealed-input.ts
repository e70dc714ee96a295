import { IdempotencyConfigError } from '../errors/errors.js';
import { isSealed, type Keyring, type Sealed } from './keyring.js';

/** What sealing needs of an operation: its name and the input fields it declares sensitive. */
type SealingOperation = { readonly name: string; readonly sensitiveInput: readonly string[] };

/**
 * The job input with the operation's `sensitiveInput` fields sealed, so Redis never holds them
 * in clear. Fails closed: an operation that declares sensitive fields cannot be enqueued
 * without a keyring.
 */
export function sealInput(op: SealingOperation, input: unknown, keyring: Keyring | undefined): unknown {
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
    out[f] = keyring.seal(input[f], 'input');
  }
  return out ?? input;
}

/**
 * The job input with sealed `sensitiveInput` fields opened; fields in clear (a job added without
 * the producer helper) pass as they are. Throws SealError when a sealed field cannot be opened.
 */
export function openInput(op: SealingOperation, input: unknown, keyring: Keyring): unknown {
  if (op.sensitiveInput.length === 0 || !isRecord(input)) return input;
  let out: Record<string, unknown> | undefined;
  for (const f of op.sensitiveInput) {
    const v = Object.hasOwn(input, f) ? input[f] : undefined;
    if (!isSealed(v)) continue;
    out ??= { ...input };
    out[f] = keyring.open(v as Sealed, 'input');
  }
  return out ?? input;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
