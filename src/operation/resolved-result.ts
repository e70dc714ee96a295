import { InvalidInputError } from '../errors/errors.js';
import type { Keyring } from '../sealing/keyring.js';
import { isSealedResult, openResult, type SealedResult, sealResult } from '../sealing/sealed-result.js';

/** The operation of a key as a resolve uses it: its name, result schema and public fields. */
export type ResolvingOperation = {
  readonly name: string;
  readonly publicResult: readonly string[];
  parseResult(value: unknown): unknown;
};

/**
 * The result an operator found, as a resolve records it for the row `record` (its operation and
 * key): sealed the way the operation's own completion seals it. With `operation` (it must be the
 * row's, by name) the value is checked by its result schema and its `publicResult` fields stay in
 * clear beside `$sealed`; without it, `publicFields` names the fields kept in clear (each a
 * top-level field of a plain-object result, checked), and none are by default. A value already
 * sealed is opened for this row first (a seal made for another row is refused). Nothing is
 * recorded here: a refusal (`IDEMPOTENCY_INVALID_INPUT`) leaves the row as it was.
 *
 * @example
 * const result = resolvedResult(record, { chargeId: 'ch_1', card: '4242…' }, keyring, { operation: chargeOrder });
 * await resolveKey(ledger, record.key, { committed: true, result }, { actor: 'bob', reason: 'found it' });
 */
export function resolvedResult(
  record: { operation: string; key: string },
  found: unknown,
  keyring: Keyring,
  options: { operation?: ResolvingOperation | undefined; publicFields?: readonly string[] | undefined } = {},
): SealedResult<unknown> {
  const place = { operation: record.operation, key: record.key };
  const value = isSealedResult(found) ? openResult(found, keyring, place) : found;
  const op = options.operation;
  if (op) {
    if (op.name !== record.operation) {
      throw new InvalidInputError('resolve', [
        { path: 'operation', message: 'is not the operation of the key (the ledger names another)' },
      ]);
    }
    op.parseResult(value);
    return sealResult(value, op.publicResult, keyring, place);
  }
  const fields = options.publicFields ?? [];
  checkPublicFields(value, fields);
  return sealResult(value, fields, keyring, place);
}

/** Fields named to stay in clear: distinct top-level fields present in a plain-object result. */
function checkPublicFields(value: unknown, fields: readonly string[]): void {
  if (fields.length === 0) return;
  const plain =
    typeof value === 'object' &&
    value !== null &&
    !Array.isArray(value) &&
    [Object.prototype, null].includes(Object.getPrototypeOf(value));
  const issues: { path: string; message: string }[] = [];
  if (!plain) issues.push({ path: 'result', message: 'has no fields to keep in clear: it is not a plain object' });
  else {
    fields.forEach((f, i) => {
      const name = typeof f === 'string' && f !== '' && f !== '__proto__' ? f : undefined;
      if (name === undefined || fields.indexOf(f) !== i || !Object.hasOwn(value, name)) {
        issues.push({ path: `publicFields.${i}`, message: 'is not a distinct top-level field of the result' });
      } else if ((value as Record<string, unknown>)[name] === undefined) {
        issues.push({ path: `publicFields.${i}`, message: 'names a field without a value' });
      }
    });
  }
  if (issues.length > 0) throw new InvalidInputError('resolve', issues);
}
