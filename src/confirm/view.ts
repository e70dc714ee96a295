import type { Confirmation } from './types.js';

/** A request as operators and the HTTP endpoint see it: sealed details by their size only, parked jobs by count. */
export function confirmationView(c: Confirmation) {
  const { details, waiters, readAt: _r, ...rest } = c;
  return { ...rest, details: details ? { sealed: true, chars: details.length } : null, waitingJobs: waiters.length };
}
