import type { RedactionPolicy } from '../redaction/define-policy.js';
import type { HmacKeyring } from '../redaction/hmac-keyring.js';
import {
  type CompiledIdentifierFormats,
  identifierFormatsOf,
  NO_DECLARED_FORMATS,
} from '../redaction/identifier-formats.js';
import { engineOf } from '../redaction/policy-engine.js';
import { mergeReceipts, ReceiptBuilder, type RedactionReceipt } from '../redaction/receipt.js';
import { redact } from '../redaction/redact.js';
import { redactDetails } from '../redaction/redact-details.js';
import type { AuditEvent } from './audit-event.js';
import { boundFields } from './bound-fields.js';
import {
  isActionName,
  isCode,
  isEventId,
  isFieldIdentifier,
  isJobId,
  isLibraryKey,
  isStateRef,
  isTypeName,
} from './identifier-grammar.js';

/** Scrubs an event before it leaves the process (Redis is storage too). */
export type AuditRedactor = (event: AuditEvent) => AuditEvent;

/** The clear-text fields of an event, each with its grammar (see identifier-grammar). */
export type TextField =
  | 'actorId'
  | 'action'
  | 'resourceType'
  | 'resourceId'
  | 'reasonCode'
  | 'taskId'
  | 'stepId'
  | 'operationId'
  | 'operation'
  | 'jobId'
  | 'queue'
  | 'beforeStateRef'
  | 'afterStateRef';

/** Fields an event can carry: the grammar only reads them (an invalid event may lack some). */
type EventFields = Partial<Record<keyof AuditEvent, unknown>>;

export type Grammar = (v: string, e: EventFields) => boolean;

/** Values a field's passing verdicts are remembered for, before its memory starts over. */
const MAX_REMEMBERED = 4096;

/**
 * A grammar that depends on the value alone, remembering the values it passed: the clear-text
 * fields repeat from event to event (an actor, an action, a queue, a job's key in each of its
 * events), and each check runs a handful of regular expressions. Only passing values are kept:
 * they are stored in clear anyway, while a failing one (a secret in the wrong field) becomes a
 * reference and is not held on to. Bounded: past {@link MAX_REMEMBERED} values it starts over.
 */
function remembered(grammar: (v: string) => boolean): (v: string) => boolean {
  const passed = new Set<string>();
  return (v) => {
    if (passed.has(v)) return true;
    if (!grammar(v)) return false;
    if (passed.size >= MAX_REMEMBERED) passed.clear();
    passed.add(v);
    return true;
  };
}

/**
 * The grammar of each field, with the application's declared identifier formats (see
 * `identifier-formats.ts`). `resourceId` takes the bounded key form only in the library's own
 * events about a key; a job id `idem_…` must be the hash of the event's own key. Each set of
 * grammars remembers the values it passed (see {@link remembered}).
 */
function grammarsOf(formats: CompiledIdentifierFormats): readonly [TextField, Grammar][] {
  const id = (field: TextField, max: number): Grammar => remembered((v) => isFieldIdentifier(field, v, max, formats));
  const resourceId = remembered((v) => isFieldIdentifier('resourceId', v, 255, formats));
  const stateRef = (field: 'beforeStateRef' | 'afterStateRef') =>
    remembered((v) => isStateRef(v) || (formats.declared && formats.matches(field, v)));
  return [
    ['actorId', id('actorId', 200)],
    ['action', remembered(isActionName)],
    ['resourceType', remembered(isTypeName)],
    [
      'resourceId',
      // The key forms first: a key is remembered when it passes (see isLibraryKey), while the
      // identifier grammar, which a key with an escape (`%2F`) fails, would be asked again at every event.
      (v, e) => isLibraryKey(v, e.actorType === 'system' && e.resourceType === 'idempotency_key') || resourceId(v),
    ],
    ['reasonCode', remembered((v) => isCode(v) || (formats.declared && formats.matches('reasonCode', v)))],
    ['taskId', id('taskId', 200)],
    ['stepId', id('stepId', 200)],
    // The key form first: the event's resourceId, checked just before, has remembered it.
    ['operationId', remembered((v) => isLibraryKey(v, true) || isFieldIdentifier('operationId', v, 255, formats))],
    ['operation', id('operation', 200)],
    [
      'jobId',
      (v, e) =>
        isJobId(v, typeof e.operationId === 'string' ? e.operationId : undefined) ||
        (formats.declared && v.length <= 255 && formats.matches('jobId', v)),
    ],
    ['queue', id('queue', 200)],
    ['beforeStateRef', stateRef('beforeStateRef')],
    ['afterStateRef', stateRef('afterStateRef')],
  ];
}

const GRAMMARS = grammarsOf(NO_DECLARED_FORMATS);

/** The grammars of a policy: the shared ones when it declares no identifier format. */
function grammarsFor(policy: RedactionPolicy): readonly [TextField, Grammar][] {
  const formats = identifierFormatsOf(policy);
  return formats.declared ? grammarsOf(formats) : GRAMMARS;
}

/** The grammars `applyFieldGrammars` takes, for a policy's declared identifier formats. */
export function fieldGrammarsOf(policy: RedactionPolicy): readonly [TextField, Grammar][] {
  return grammarsFor(policy);
}

/** The fields {@link applyFieldGrammars} checks. */
export const GRAMMAR_FIELDS: ReadonlySet<string> = new Set(['eventId', ...GRAMMARS.map(([f]) => f)]);

/** Rule id in the receipt of a field that did not match its grammar and was referenced. */
export const GRAMMAR_RULE = 'grammar.ref';

/**
 * Applies the field grammars to `event` in place (`source` is the event as it came: the
 * grammars read it, so one field's reference never changes another's verdict). A value that
 * fails its grammar becomes the keyed reference `hmac:<kid>:…` of itself: nothing is dropped, a
 * required field stays non-empty, and an auditor with the key can still match it
 * (`verifyRef`). A value that already is a reference of the ring (verified, not only
 * well-shaped) stays as it is, so applying this twice changes nothing.
 *
 * @returns the receipt of what was done, or undefined when no field is or holds a reference.
 */
export function applyFieldGrammars(
  source: EventFields,
  target: EventFields,
  keyring: HmacKeyring,
  receiptOf: () => ReceiptBuilder,
  grammars: readonly [TextField, Grammar][] = GRAMMARS,
): ReceiptBuilder | undefined {
  let receipt: ReceiptBuilder | undefined;
  for (const [field, grammar] of grammars) {
    const v = source[field];
    if (typeof v !== 'string') continue;
    const known = keyring.recognise(v, 'hmac');
    if (known !== undefined) {
      receipt ??= receiptOf();
      receipt.keyId(known);
    } else if (!grammar(v, source)) {
      receipt ??= receiptOf();
      receipt.hit(GRAMMAR_RULE, [field]);
      receipt.keyId(keyring.currentId);
      target[field] = keyring.identifierRef(v);
    }
  }
  const id = source.eventId;
  if (typeof id === 'string' && !isEventId(id)) {
    // A reference does not fit an event id (64 characters at most); a keyed digest of the
    // library's own event-id length does, and passes the grammar the next time.
    receipt ??= receiptOf();
    receipt.hit(GRAMMAR_RULE, ['eventId']);
    target.eventId = keyring.digest('identifier', id).slice(0, 32);
  }
  return receipt;
}

/**
 * The typed bounds (`boundFields`), then the field grammars: `bounded` is the event within its
 * bounds (`event` itself when nothing changed), `out` a copy with the references, `receipt` what
 * both did. When neither did anything (the common case), `receipt` is undefined and `out` is
 * `event` itself: no copy is made, and a caller that changes `out` copies it first.
 */
function structureFields(
  event: AuditEvent,
  keyring: HmacKeyring,
  receiptOf: () => ReceiptBuilder,
  grammars: readonly [TextField, Grammar][],
): { bounded: AuditEvent; out: AuditEvent; receipt: RedactionReceipt | undefined } {
  let receipt: ReceiptBuilder | undefined;
  const builder = () => (receipt ??= receiptOf());
  const bounded = boundFields(event, builder);
  // Only a field that fails its grammar is written here, and never without a receipt.
  const changes: EventFields = {};
  applyFieldGrammars(bounded, changes, keyring, builder, grammars);
  const built = (receipt as ReceiptBuilder | undefined)?.build();
  const out = built === undefined && bounded === event ? event : ({ ...bounded, ...changes } as AuditEvent);
  return { bounded, out, receipt: built };
}

/** True when `extra` adds nothing to `base`: no rule fired, every key id is listed already. */
function addsNothing(base: RedactionReceipt, extra: RedactionReceipt): boolean {
  return extra.rules.length === 0 && extra.keyIds.every((k) => base.keyIds.includes(k));
}

/**
 * The field grammars (and the typed bounds, see `boundFields`) alone, for the writer's last check of every event before Postgres: events
 * from the backfill, the CLI or another producer may not have been through an emitter's
 * redaction. Returns the event itself when every field passes (the common case: nothing is
 * allocated but a scratch copy), else a copy with the failing fields as keyed references and the
 * receipt merged.
 */
export function fieldGrammarRedactor(policy: RedactionPolicy): AuditRedactor {
  const engine = engineOf(policy);
  const receiptOf = () => new ReceiptBuilder(engine.version, '$', engine.limits.maxReceiptPaths);
  const grammars = grammarsFor(policy);
  return (event: AuditEvent): AuditEvent => {
    const { bounded, out, receipt: built } = structureFields(event, engine.keyring, receiptOf, grammars);
    if (!built) return event;
    let changed = bounded !== event;
    for (const f of GRAMMAR_FIELDS) {
      if (out[f as keyof AuditEvent] !== event[f as keyof AuditEvent]) changed = true;
    }
    if (!changed) return event;
    const before = event.redaction as RedactionReceipt | undefined;
    out.redaction = before ? mergeReceipts(before, built) : built;
    return out;
  };
}

/**
 * The emitter's redaction step. Counters that are not whole numbers in range are made so, and
 * numbers told in text fields become text (`boundFields`, flagged in the receipt). Every
 * clear-text field (actor, action, resource, codes, task, step, operation, job, queue, state
 * refs) must match its grammar, or it becomes a keyed
 * reference; system events too, since job ids, queue names and keys are user-chosen. `details`
 * are allow-listed per action (fail closed: an action the policy does not list, or one that is
 * not an action name, keeps no details, only a count of what was left out), typed and redacted,
 * long text summarised. The receipt rides on the event. Idempotent: an event redacted twice is
 * the event redacted once, as the writer or a backfill may see an event again.
 *
 * @example
 * const emitter = new AuditEmitter({ queue, pool, redact: auditRedactor(policy) });
 */
export function auditRedactor(policy: RedactionPolicy): AuditRedactor {
  const engine = engineOf(policy);
  const receiptOf = () => new ReceiptBuilder(engine.version, '$', engine.limits.maxReceiptPaths);
  const grammars = grammarsFor(policy);
  const redactor = (event: AuditEvent): AuditEvent => {
    let { out, receipt: fields } = structureFields(event, engine.keyring, receiptOf, grammars);
    let receipt: RedactionReceipt | undefined;
    if (event.details) {
      if (out === event) out = { ...event };
      // The allow-list is looked up by the action as it is told: an action that is not an
      // action name keeps only what every action may keep, the same before and after its ref.
      const r = redactDetails(out.action, event.details, policy, { rootPath: '$.details' });
      out.details = r.value;
      receipt = r.receipt;
    }
    if (fields) receipt = receipt ? mergeReceipts(receipt, fields) : fields;
    if (receipt) {
      const before = event.redaction as RedactionReceipt | undefined;
      if (!before) out.redaction = receipt;
      else if (!addsNothing(before, receipt)) out.redaction = mergeReceipts(before, receipt);
    }
    return out;
  };
  REDACTOR_POLICIES.set(redactor, policy);
  return redactor;
}

/** The policy of each redactor {@link auditRedactor} made. */
const REDACTOR_POLICIES = new WeakMap<AuditRedactor, RedactionPolicy>();

/**
 * The policy `redact` redacts by, when it is the library's own {@link auditRedactor}; undefined
 * for any other function (its batches are not tagged: batch-tag.ts).
 */
export function policyOfRedactor(redact: AuditRedactor): RedactionPolicy | undefined {
  return REDACTOR_POLICIES.get(redact);
}

/**
 * The writer's redaction of every event before Postgres, whoever made it (an emitter, the
 * backfill, the CLI, an operator's call from code, another producer), by the emitters' policy:
 * the field grammars and bounds (as {@link fieldGrammarRedactor}), then the policy's field
 * classes and value scanners over the details (a password field, an e-mail address or a token in
 * a note, an operator's reason scanned with the application's own scanners too). The details
 * allow-list stays where events are made (the emitter, {@link auditRedactor}), which knows the
 * processor's actions; a writer may serve many. Idempotent: an emitter's event is unchanged.
 * Returns the event itself when nothing changed.
 */
export function storeRedactor(policy: RedactionPolicy): AuditRedactor {
  const grammars = fieldGrammarRedactor(policy);
  return (event: AuditEvent): AuditEvent => {
    const structured = grammars(event);
    const details = structured.details;
    if (!details) return structured;
    const r = redact(details, policy, { rootPath: '$.details' });
    // Copy-on-write: the same object back when no value was redacted.
    if (r.value === details) return structured;
    const before = structured.redaction as RedactionReceipt | undefined;
    return {
      ...structured,
      details: r.value as Record<string, unknown>,
      redaction: before ? mergeReceipts(before, r.receipt) : r.receipt,
    };
  };
}
