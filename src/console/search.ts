import { ConfirmationStore } from '../confirm/confirmation-store.js';
import { checkSchema } from '../db/connection.js';
import { engineOf } from '../redaction/policy-engine.js';
import { mayAnswer, type Operator } from '../shared/operators.js';
import type { ConsoleDeps } from './deps.js';
import { html, type Markup, operationLink } from './html.js';

const MAX_FOUND = 100;
/** Longest text searched for. */
export const MAX_QUERY = 1000;

export type Found = { key: string; operation: string | null; how: 'operation key' | 'task id' | 'job id' };

/**
 * The operations an id names, whichever it is: an operation key (its bounded form), a task id or
 * a job id. The trail keeps an id that fails its grammar as a keyed reference: it is looked up by
 * its references under every key of the process's policy too, as `timeline` does.
 */
export async function search(
  deps: ConsoleDeps,
  operator: Operator,
  q: string,
): Promise<{ found: Found[]; hidden: number }> {
  const found = new Map<string, Found>();
  const add = (key: string, operation: string | null, how: Found['how']) => {
    if (!found.has(key)) found.set(key, { key, operation, how });
  };
  const record = await deps.ledger.get(q).catch(() => null);
  if (record) add(record.key, record.operation, 'operation key');
  const values = [q, ...engineOf(deps.policy).keyring.identifierRefs(q)];
  const s = checkSchema(deps.schema);
  const [events, confirmations, ledgerJobs, eventJobs] = await Promise.all([
    deps.store.events({ taskId: q }),
    new ConfirmationStore(deps.pool, deps.schema).of({ taskId: q }),
    deps.pool.query<{ key: string; operation: string }>(
      `select key, operation from ${s}.idempotency_ledger where job_id = $1 or task_id = $1 limit $2`,
      [q, MAX_FOUND],
    ),
    deps.pool.query<{ key: string; operation: string | null }>(
      `select distinct resource_id as key, operation from ${s}.audit_events
where job_id = any($1::text[]) and resource_type = 'idempotency_key' limit $2`,
      [values, MAX_FOUND],
    ),
  ]);
  for (const e of events) if (e.resourceType === 'idempotency_key') add(e.resourceId, e.operation ?? null, 'task id');
  for (const c of confirmations) add(c.operationKey, c.operation, 'task id');
  for (const r of ledgerJobs.rows) add(r.key, r.operation, 'job id');
  for (const r of eventJobs.rows) add(r.key, r.operation, 'job id');
  const all = [...found.values()].slice(0, MAX_FOUND);
  const mine = all.filter((f) => mayAnswer(operator, f.key));
  return { found: mine, hidden: all.length - mine.length };
}

export function renderSearch(base: string, q: string, r: { found: Found[]; hidden: number }): Markup {
  const form = html`<form method="get" action="${base}/search"><label for="q2">Task id, operation key or job id</label>
<input id="q2" type="search" name="q" value="${q}" required maxlength="${MAX_QUERY}"><button type="submit">Search</button></form>`;
  if (q === '') return form;
  const hidden = r.hidden > 0 ? html`<p class="muted">${r.hidden} more outside your namespaces are not shown.</p>` : '';
  if (r.found.length === 0) return html`${form}<p>Nothing found for <code>${q}</code>.</p>${hidden}`;
  return html`${form}<table><thead><tr><th scope="col">Operation key</th><th scope="col">Operation</th><th scope="col">Found by</th></tr></thead><tbody>
${r.found.map((f) => html`<tr><td data-label="Operation key">${operationLink(base, f.key)}</td><td data-label="Operation">${f.operation}</td><td data-label="Found by">${f.how}</td></tr>`)}</tbody></table>${hidden}`;
}
