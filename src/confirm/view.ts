import type { RedactionPolicy } from '../redaction/define-policy.js';
import { storedActorAsShown } from './actor-id.js';
import type { Confirmation } from './types.js';

/**
 * A request as operators and the HTTP endpoint see it: sealed details by their size only, parked
 * jobs by count, the actor who answered as the audit trail tells it (in clear when an identifier,
 * else a keyed reference of `policy`: a request answered before actors were stored so is shown
 * the same way).
 */
export function confirmationView(c: Confirmation, policy: RedactionPolicy) {
  const { details, waiters, readAt: _r, ...rest } = c;
  return {
    ...rest,
    answeredBy:
      c.answeredBy === null || c.answeredByType === 'system' ? c.answeredBy : storedActorAsShown(c.answeredBy, policy),
    details: details ? { sealed: true, chars: details.length } : null,
    waitingJobs: waiters.length,
  };
}
