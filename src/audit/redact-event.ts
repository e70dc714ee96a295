import type { RedactionPolicy } from '../redaction/define-policy.js';
import { mergeReceipts, type RedactionReceipt } from '../redaction/receipt.js';
import { redactDetails } from '../redaction/redact-details.js';
import { redactString } from '../redaction/redact-string.js';
import type { AuditEvent } from './audit-event.js';
import type { AuditRedactor } from './emitter.js';

/** Free-text fields a processor or operator fills in; keys and ids the library makes are left as they are. */
const SCANNED: readonly ('actorId' | 'reasonCode' | 'beforeStateRef' | 'afterStateRef')[] = [
  'actorId',
  'reasonCode',
  'beforeStateRef',
  'afterStateRef',
];

/**
 * The emitter's redaction step: `details` are allow-listed per action and redacted (fail closed:
 * an action the policy does not list keeps no details, only a count of what was left out), the
 * free-text fields go through the value scanners, and the receipt rides on the event.
 */
export function auditRedactor(policy: RedactionPolicy): AuditRedactor {
  return (event: AuditEvent): AuditEvent => {
    const out: AuditEvent = { ...event };
    let receipt: RedactionReceipt | undefined;
    if (event.details) {
      const r = redactDetails(event.action, event.details, policy, { rootPath: '$.details' });
      out.details = r.value as Record<string, unknown>;
      receipt = r.receipt;
    }
    // The library writes system events' text itself (actor `worker:<pid>`, state refs, error
    // codes); what a processor or operator supplied is scanned.
    if (event.actorType !== 'system') {
      for (const f of SCANNED) {
        const v = event[f];
        if (v !== undefined) out[f] = redactString(v, policy).slice(0, 255);
      }
    } else if (event.reasonCode !== undefined) {
      out.reasonCode = redactString(event.reasonCode, policy).slice(0, 100);
    }
    if (event.action.startsWith('tool.') || event.resourceType !== 'idempotency_key') {
      out.resourceId = redactString(event.resourceId, policy).slice(0, 255);
    }
    if (receipt)
      out.redaction = event.redaction ? mergeReceipts(event.redaction as RedactionReceipt, receipt) : receipt;
    return out;
  };
}
