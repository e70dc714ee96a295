import { parentKeyOf } from '../audit/derive.js';
import { type Timeline, timeline } from '../audit/timeline.js';
import { ConfirmationStore } from '../confirm/confirmation-store.js';
import type { Confirmation } from '../confirm/types.js';
import type { LedgerRecord } from '../ledger/types.js';
import { type OpenedValues, sealedOfResult, sealedSummary } from '../sealing/open-record.js';
import { isSealedResult, SEALED_FIELD } from '../sealing/sealed-result.js';
import { isSealed } from '../sealing/sealed-text.js';
import type { ConsoleDeps } from './deps.js';
import { html, type Markup, operationLink, span, time } from './html.js';

/** One operation as its page shows it: the ledger record, its confirmations and its task's timeline. */
export type OperationView = { record: LedgerRecord; confirmations: Confirmation[]; timeline: Timeline };

/** Reads an operation through the library: `ledger.get`, the confirmation store, `timeline()`. */
export async function readOperation(deps: ConsoleDeps, key: string): Promise<OperationView | undefined> {
  const record = await deps.ledger.get(key);
  if (!record) return undefined;
  const [confirmations, story] = await Promise.all([
    new ConfirmationStore(deps.pool, deps.schema).of({ operationKey: record.key }),
    timeline(record.taskId ? { taskId: record.taskId } : { operationKey: record.key }, {
      store: deps.store,
      ledger: deps.ledger,
    }),
  ]);
  return { record, confirmations, timeline: story };
}

/** A result as the page shows it: public fields in clear, the sealed whole by its key and size. */
export function resultText(result: unknown): string {
  if (result === null || result === undefined) return '—';
  if (isSealedResult(result)) {
    const { [SEALED_FIELD]: sealed, ...clear } = result as Record<string, unknown>;
    const masked = JSON.stringify(clear, (_k, v) => (isSealed(v) ? `<${sealedSummary(v)}>` : v));
    const summary = sealedSummary(sealed as string);
    return Object.keys(clear).length > 0 ? `${masked} + ${summary}` : summary;
  }
  if (isSealed(result)) return sealedSummary(result);
  return JSON.stringify(result, (_k, v) => (isSealed(v) ? `<${sealedSummary(v)}>` : v));
}

/** What a form of this page carries besides its own fields: the anti-forgery token and a one-time id. */
export type FormFields = () => Markup;

/** Whether the record holds anything sealed that an allowed operator could open. */
export function hasSealed(r: LedgerRecord): boolean {
  return sealedOfResult(r.result) !== undefined || r.error?.sealed !== undefined;
}

function facts(base: string, r: LedgerRecord, attempts: number): Markup {
  const row = (k: string, v: Markup | string | number | null) => html`<dt>${k}</dt><dd>${v ?? '—'}</dd>`;
  return html`<dl>
${row('Operation key', html`<code>${r.key}</code>`)}${row('Namespace', r.namespace)}${row('Resource key', r.resourceKey)}${row('Version', r.version)}
${row('Operation', r.operation)}${row('Status', html`<span class="status status-${r.status}" data-status="${r.status}">${r.status}</span>`)}${row('Epoch', r.epoch)}
${row('Attempts', attempts)}${row('Downstream', r.downstream)}${row('Job', r.jobId ? `${r.queue ?? '?'} / ${r.jobId}` : null)}
${row('Task', r.taskId)}${row('Step', r.stepId)}${row('Lease owner', r.leaseOwner)}${row('Lease expires', time(r.leaseExpiresAt))}
${row('Created', time(r.createdAt))}${row('Claimed', html`${time(r.claimedAt)} (${r.claimTransition})`)}${row('Completed', time(r.completedAt))}
${row('Last change', html`${time(r.updatedAt)} (${r.lastTransition})`)}${row('Kept until', time(r.expiresAt))}
${row('Result', html`<span class="sealed">${resultText(r.result)}</span>`)}
${row('Error', r.error ? html`${r.error.code}${r.error.name && r.error.name !== r.error.code ? ` (${r.error.name})` : ''}: ${r.error.message}${r.error.sealed ? html` <span class="sealed">text ${isSealed(r.error.sealed) ? sealedSummary(r.error.sealed) : 'sealed'}</span>` : ''}` : null)}
${r.stepId ? '' : row('Steps and task', r.taskId ? html`<a href="${base}/search?q=${encodeURIComponent(r.taskId)}">all operations of task ${r.taskId}</a>` : null)}
</dl>`;
}

function confirmationForms(base: string, list: Confirmation[], fields: FormFields, now: number): Markup {
  if (list.length === 0) return html``;
  return html`<h2 id="confirmations">Confirmations</h2>${list.map(
    (
      c,
    ) => html`<section aria-label="Confirmation ${c.id}"><h3><code>${c.id}</code> ${c.name}: <span class="status status-${c.status}" data-confirmation-status="${c.status}">${c.status}</span></h3>
<p>${c.reason}</p><p class="muted">Asked ${time(c.requestedAt)}; times out ${time(c.expiresAt)} (${c.status === 'pending' ? (c.overdue ? 'overdue' : `in ${span(c.expiresAt.getTime() - now)}`) : 'settled'}, then ${c.onTimeout}).
${c.details ? ` Details sealed (${c.details.length} characters).` : ''}${c.answeredBy ? ` Answered by ${c.answeredByType}:${c.answeredBy} at ${c.answeredAt?.toISOString()}${c.comment ? `: ${c.comment}` : ''}.` : ''}</p>
${
  c.status === 'pending'
    ? html`<form class="action" method="post" action="${base}/action">${fields()}<input type="hidden" name="action" value="answer">
<input type="hidden" name="id" value="${c.id}">
<label for="reason-${c.id}">Reason for your answer (kept in the audit trail)</label>
<input id="reason-${c.id}" type="text" name="reason" required maxlength="500" autocomplete="off">
<button type="submit" name="decision" value="approve">Approve</button><button type="submit" name="decision" value="deny" class="danger">Deny</button></form>`
    : ''
}</section>`,
  )}`;
}

function actionForms(base: string, r: LedgerRecord, fields: FormFields, canOpen: boolean): Markup {
  const reason = (id: string) =>
    html`<label for="${id}">Reason (kept in the audit trail)</label><input id="${id}" type="text" name="reason" required maxlength="500" autocomplete="off">`;
  const key = html`<input type="hidden" name="key" value="${r.key}">`;
  const resolve =
    r.status === 'unknown'
      ? html`<form class="action" method="post" action="${base}/action" aria-labelledby="resolve-c">${fields()}${key}
<input type="hidden" name="action" value="resolve-committed"><h3 id="resolve-c">Resolve: it was committed</h3>
<label for="result">The result a replay returns (JSON, checked by the operation's result schema when the console knows it; sealed before it is recorded)</label>
<textarea id="result" name="result" rows="3" required spellcheck="false"></textarea>${reason('reason-rc')}
<button type="submit">Resolve as committed</button></form>
<form class="action" method="post" action="${base}/action" aria-labelledby="resolve-n">${fields()}${key}
<input type="hidden" name="action" value="resolve-not-committed"><h3 id="resolve-n">Resolve: it was not committed</h3>
<p class="muted">The next claim of the key runs the operation again.</p>${reason('reason-rn')}
<button type="submit">Resolve as not committed</button></form>`
      : '';
  const invalidate = html`<form class="action" method="post" action="${base}/action" aria-labelledby="inv">${fields()}${key}
<input type="hidden" name="action" value="invalidate"><h3 id="inv">Invalidate</h3>
<p class="muted">Evicts the key whatever its state (fencing any attempt holding it): its next claim runs again.</p>${reason('reason-inv')}
<label><input type="checkbox" name="rerun" value="yes"${r.queue ? '' : ' disabled'}> and re-run its job now</label>
<button type="submit" class="danger">Invalidate</button></form>`;
  const rerun =
    (r.status === 'invalidated' || r.status === 'released') && r.queue
      ? html`<form class="action" method="post" action="${base}/action" aria-labelledby="rr">${fields()}${key}
<input type="hidden" name="action" value="rerun"><h3 id="rr">Re-run</h3><p class="muted">Retries the key's finished job in queue ${r.queue}.</p>${reason('reason-rr')}
<button type="submit">Re-run its job</button></form>`
      : '';
  const open =
    canOpen && hasSealed(r)
      ? html`<form class="action" method="post" action="${base}/open" aria-labelledby="op">${fields()}${key}
<h3 id="op">Open the sealed values</h3><p class="muted">Each opening is recorded in the audit trail with your reason.</p>${reason('reason-op')}
<button type="submit" class="secondary">Open sealed values</button></form>`
      : '';
  return html`<h2 id="actions">Actions</h2>${resolve}${invalidate}${rerun}${open}`;
}

function opened(values: OpenedValues | undefined): Markup {
  if (!values) return html``;
  return html`<section aria-labelledby="opened" class="flash"><h2 id="opened">Opened values (audited)</h2>
${values.result ? html`<h3>Result</h3><pre>${JSON.stringify(values.result.value, null, 2)}</pre>` : ''}
${values.error ? html`<h3>Error text</h3><pre>${JSON.stringify(values.error, null, 2)}</pre>` : ''}</section>`;
}

function timelineView(base: string, t: Timeline): Markup {
  const td = (label: string, v: Markup | string | number | null | undefined) =>
    html`<td data-label="${label}">${v ?? ''}</td>`;
  return html`<h2 id="timeline">Timeline</h2>
<p>${t.attempts.length} attempts, ${t.takeovers} takeovers, ${t.replays} replays, ${t.waits.length} waits, ${t.confirmations.length} confirmations.</p>
<h3>Attempts</h3><table><thead><tr><th scope="col">Operation</th><th scope="col">Epoch</th><th scope="col">Job</th><th scope="col">Start</th><th scope="col">End</th><th scope="col">Decisions</th></tr></thead><tbody>
${t.attempts.map((a) => html`<tr>${td('Operation', operationLink(base, a.operationId, a.stepId ? `step ${a.stepId}` : a.operationId))}${td('Epoch', a.epoch)}${td('Job', a.jobId)}${td('Start', a.start)}${td('End', a.end ?? 'running')}${td('Decisions', a.decisions.map((d) => `${d.action}: ${d.decision}${d.reasonCode ? ` (${d.reasonCode})` : ''}`).join('; '))}</tr>`)}</tbody></table>
${t.waits.length > 0 ? html`<h3>Waits</h3><ul>${t.waits.map((w) => html`<li>${w.jobId ?? 'a job'} waited for epoch ${w.epoch}${w.stepId ? ` (step ${w.stepId})` : ''}: ${time(w.since)} → ${w.until ? time(w.until) : 'still waiting'}</li>`)}</ul>` : ''}
${t.confirmations.length > 0 ? html`<h3>Confirmation waits</h3><ul>${t.confirmations.map((c) => html`<li><code>${c.id}</code> ${c.status}: ${c.since ? time(c.since) : '?'} → ${c.until ? time(c.until) : 'waiting'}${c.answeredBy ? ` by ${c.answeredBy}` : ''}${c.reasonCode ? ` (${c.reasonCode})` : ''}</li>`)}</ul>` : ''}
<h3>Events</h3><table><thead><tr><th scope="col">At</th><th scope="col">Action</th><th scope="col">Decision</th><th scope="col">Reason code</th><th scope="col">Epoch</th><th scope="col">Job</th><th scope="col">Actor</th></tr></thead><tbody>
${t.events.map((e) => html`<tr data-action="${e.action}">${td('At', time(e.createdAt))}${td('Action', e.action)}${td('Decision', e.decision)}${td('Reason code', e.reasonCode)}${td('Epoch', e.epoch)}${td('Job', e.jobId)}${td('Actor', `${e.actorType}:${e.actorId}`)}</tr>`)}</tbody></table>
<h3>Final states</h3><ul>${t.finalStates.map((s) => html`<li>${operationLink(base, s.key)}: ${s.status} (epoch ${s.epoch})</li>`)}</ul>`;
}

/** The page of one operation: facts, confirmations (with their forms), actions, opened values, timeline. */
export function renderOperation(
  base: string,
  view: OperationView,
  o: { fields: FormFields; canOpen: boolean; opened?: OpenedValues },
): Markup {
  const r = view.record;
  const id = parentKeyOf(r);
  const attempts = view.timeline.attempts.filter(
    (a) => a.operationId === id && a.stepId === (r.stepId ?? undefined),
  ).length;
  return html`${facts(base, r, attempts)}${opened(o.opened)}${confirmationForms(base, view.confirmations, o.fields, Date.now())}
${actionForms(base, r, o.fields, o.canOpen)}${timelineView(base, view.timeline)}`;
}
