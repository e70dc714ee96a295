import { canonicalText, summariseContent } from '../redaction/content-summary.js';
import type { RedactionPolicy } from '../redaction/define-policy.js';
import { engineOf } from '../redaction/policy-engine.js';
import { OMITTED_KEY } from '../redaction/policy-schema.js';
import { ReceiptBuilder } from '../redaction/receipt.js';
import { redactDetails } from '../redaction/redact-details.js';
import { auditEventSchema } from './audit-event.js';
import { applyFieldGrammars, GRAMMAR_FIELDS } from './redact-event.js';

const SHAPE: Record<string, { safeParse(v: unknown): { success: boolean } }> = auditEventSchema.shape;

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * What the dead-letter table keeps of an event the writer could not store: an invalid event may
 * never have been through an emitter, so it is told like any event, structurally. Clear-text
 * fields follow their grammars (else keyed refs); other fields of the schema are kept when
 * valid, referenced when not (a `decision` of `maybe-<token>` is no decision); an invalid
 * receipt and fields the schema does not know are counted, not named (`_omitted: { count }`);
 * `details` are allow-listed for the event's action and redacted as the emitter does. Something
 * that is not an object at all keeps its content summary.
 */
export function deadLetterEvent(raw: unknown, policy: RedactionPolicy): unknown {
  const engine = engineOf(policy);
  const { keyring } = engine;
  if (!isRecord(raw)) return { notAnEvent: summariseContent(raw, keyring) };
  const out: Record<string, unknown> = {};
  let omitted = 0;
  for (const k of Object.keys(raw)) {
    const v = raw[k];
    if (!Object.hasOwn(SHAPE, k)) omitted++;
    else if (k === 'details')
      continue; // below, by the action as told
    else if (GRAMMAR_FIELDS.has(k) && typeof v === 'string')
      out[k] = v; // checked below
    else if ((SHAPE[k] as (typeof SHAPE)[string]).safeParse(v).success) out[k] = v;
    else if (k === 'redaction') omitted++;
    else out[k] = keyring.identifierRef(typeof v === 'string' ? v : canonicalText(v));
  }
  applyFieldGrammars(raw, out, keyring, () => new ReceiptBuilder(engine.version, '$', engine.limits.maxReceiptPaths));
  if (raw.details !== undefined) out.details = details(out.action, raw.details, policy);
  if (omitted > 0) out[OMITTED_KEY] = { count: omitted };
  return out;
}

/** Details as the emitter keeps them: allow-listed for the action (none when it is no string), redacted. */
function details(action: unknown, value: unknown, policy: RedactionPolicy): unknown {
  const name = typeof action === 'string' ? action : '';
  if (!isRecord(value)) return redactDetails(name, { value }, policy, { rootPath: '$.details' }).value;
  return redactDetails(name, value, policy, { rootPath: '$.details' }).value;
}
