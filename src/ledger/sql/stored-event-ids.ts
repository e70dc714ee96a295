import { statement } from './statement.js';

/**
 * The ids among $1 that are stored in the audit trail (its table of event ids, one row per
 * stored event): the sweep deletes a row only when its transitions' events are all stored.
 */
export const storedEventIds = statement<{ eventIds: readonly string[] }, { event_id: string }>({
  text: ({ auditEventIds }) => `select event_id from ${auditEventIds} where event_id = any($1::text[])`,
  values: (p) => [p.eventIds],
});
