/**
 * `bullmq-idempotency/internal`: building blocks the library uses itself, for tools and tests
 * that need them. Not the public API: these may change in any release.
 */
export { eventsForRecord } from './audit/derive.js';
export { auditEventFromWrapper } from './audit/from-wrapper.js';
export { ENVELOPE_FIELD } from './operation/envelope.js';
export { BULLMQ_DEFAULTS } from './operation/retry-window.js';
