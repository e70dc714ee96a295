import type { RedactionPolicy } from '../redaction/define-policy.js';
import { engineOf } from '../redaction/policy-engine.js';
import { fieldGrammarsOf, type Grammar, type TextField } from './redact-event.js';

/**
 * Identifiers as the library stores and shows them, wherever that is: the audit event, the
 * ledger's `task_id`, `job_id`, `step_id` and `queue` (and its transitions), a confirmation's
 * `task_id`, `name` and `answered_by`, log lines, metric labels, the CLI's and the HTTP endpoint's
 * output. One rule everywhere, the audit trail's (`identifier-grammar.ts`, `identifier-formats.ts`):
 * a value that matches a format of its field (a built-in one, one the application declares in its
 * policy's `identifiers`, or the word-like grammar) is kept in clear; a reference the policy's
 * keyring recognises is kept as it is; anything else becomes its keyed reference `hmac:<kid>:…`,
 * the same one its audit event holds. A lookup by the clear value finds either form
 * (`identifierForms`).
 *
 * @example
 * const stored = identifierAsStored('taskId', 'jane@example.com', policy) // 'hmac:k1:…'
 * identifierAsStored('taskId', '01JDQ5Z8X4H7K3M2N9P6R5T8VW', policy)     // kept: a ULID
 */
export type StoredIdentifierField = Extract<
  TextField,
  'taskId' | 'jobId' | 'stepId' | 'queue' | 'actorId' | 'resourceId'
>;

/** What a job id is checked against: the library's `idem_<hash>` ids hold for their own key only. */
export type IdentifierContext = { operationId?: string };

/** Stores identifiers under one policy: `(field, value, context?) => stored form`. */
export type IdentifierStorer = (field: StoredIdentifierField, value: string, context?: IdentifierContext) => string;

const storers = new WeakMap<RedactionPolicy, IdentifierStorer>();
/** Values decided, per storer, up to this many (job and task ids recur in every event of a job). */
const MEMO_MAX = 10_000;

/** A value decided: its stored form, for the operation id it was decided against. */
type Decided = { operationId: string; stored: string };

/** The storer of `policy` (made once per policy). */
export function identifierStorer(policy: RedactionPolicy): IdentifierStorer {
  let storer = storers.get(policy);
  if (storer) return storer;
  const { keyring } = engineOf(policy);
  const grammars = new Map<string, Grammar>(fieldGrammarsOf(policy));
  // Per field, by the value itself, not by a string joining field, operation id and value: every
  // job's id is new and asked once at its claim, and a joined key is a long string made and
  // hashed for each. The operation id is compared with what the value was decided against.
  const memos = new Map<StoredIdentifierField, Map<string, Decided>>();
  let memoSize = 0;
  storer = (field, value, context) => {
    const operationId = context?.operationId ?? '';
    let memo = memos.get(field);
    const known = memo?.get(value);
    if (known !== undefined && known.operationId === operationId) return known.stored;
    const grammar = grammars.get(field) as Grammar;
    let stored: string;
    if (keyring.recognise(value, 'hmac') !== undefined) stored = value;
    else stored = grammar(value, context ?? {}) ? value : keyring.identifierRef(value);
    if (memoSize >= MEMO_MAX) {
      memos.clear();
      memoSize = 0;
      memo = undefined;
    }
    if (memo === undefined) {
      memo = new Map();
      memos.set(field, memo);
    }
    if (!memo.has(value)) memoSize++;
    memo.set(value, { operationId, stored });
    return stored;
  };
  storers.set(policy, storer);
  return storer;
}

/** `value` as stored in `field` under `policy` (see {@link identifierStorer}). */
export function identifierAsStored(
  field: StoredIdentifierField,
  value: string,
  policy: RedactionPolicy,
  context?: IdentifierContext,
): string {
  return identifierStorer(policy)(field, value, context);
}

/**
 * Every form `value` may have been stored in: itself (kept in clear now, or stored in clear by an
 * earlier version) and its reference under each key of the policy's keyring (stored as a
 * reference, now or before a format was declared or a key rotated). What a lookup by the id the
 * application used matches against.
 */
export function identifierForms(value: string, policy: RedactionPolicy): string[] {
  return [value, ...engineOf(policy).keyring.identifierRefs(value)];
}
