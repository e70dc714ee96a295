import { type ListableStatus, type ListedRecord, listRecords } from '../../ledger/list-records.js';
import type { CliContext } from '../context.js';
import { usageError } from '../errors.js';
import { toJson } from '../format.js';

export type ListCommandOptions = {
  /** Required unless `task` is given. */
  status?: ListableStatus;
  /** Only this task's records: the id the application gave, found in clear or as its reference. */
  task?: string;
  operation?: string;
  limit: number;
  /** Keys after this one: the last key of the previous page. */
  after?: string;
  json?: boolean;
};

/** `bullmq-idempotency list`: how many rows are shown at most, unless `--limit` says otherwise. */
export const DEFAULT_LIST_LIMIT = 50;

/** The keys in a status, in key order, one page; never a result or an error's text. */
export async function listCommand(ctx: CliContext, opts: ListCommandOptions): Promise<void> {
  ctx.require('DATABASE_URL');
  if (opts.status === undefined && opts.task === undefined)
    throw usageError('give --status <status>, --task <id>, or both');
  const taskIds = opts.task === undefined ? undefined : await taskForms(ctx, opts.task);
  // One row more than asked for tells whether another page follows.
  const rows = await listRecords(await ctx.pool(), ctx.schema, {
    ...(opts.status !== undefined ? { status: opts.status } : {}),
    ...(taskIds ? { taskIds } : {}),
    limit: opts.limit + 1,
    ...(opts.operation !== undefined ? { operation: opts.operation } : {}),
    ...(opts.after !== undefined ? { after: opts.after } : {}),
  });
  const page = rows.slice(0, opts.limit);
  const next = rows.length > opts.limit ? page.at(-1)?.key : undefined;
  if (opts.json) {
    ctx.io.out(
      toJson({
        ...(opts.status ? { status: opts.status } : {}),
        ...(opts.task !== undefined ? { task: opts.task } : {}),
        records: page,
        ...(next ? { next } : {}),
      }),
    );
    return;
  }
  if (page.length === 0) {
    ctx.io.out(
      `no ${opts.status ?? ''}${opts.status ? ' ' : ''}records${opts.task !== undefined ? ` of task ${opts.task}` : ''}${
        opts.operation ? ` of operation ${opts.operation}` : ''
      }`,
    );
    return;
  }
  ctx.io.out(render(page));
  if (next) ctx.io.out(`… more: add --after '${next}'`);
}

const COLUMNS: [string, (r: ListedRecord) => string][] = [
  ['KEY', (r) => r.key],
  ['STATUS', (r) => r.status],
  ['EPOCH', (r) => String(r.epoch)],
  ['OPERATION', (r) => r.operation],
  ['JOB', (r) => (r.jobId ? `${r.queue ?? '?'}/${r.jobId}` : '-')],
  ['UPDATED', (r) => r.updatedAt.toISOString()],
  ['ERROR', (r) => r.errorCode ?? '-'],
];

function render(rows: ListedRecord[]): string {
  const cells = [COLUMNS.map(([h]) => h), ...rows.map((r) => COLUMNS.map(([, f]) => f(r)))];
  const widths = COLUMNS.map((_, i) => Math.max(...cells.map((c) => c[i]?.length ?? 0)));
  return cells.map((c) => c.map((v, i) => (i === c.length - 1 ? v : v.padEnd(widths[i] ?? 0))).join('  ')).join('\n');
}

/**
 * The forms a task id may be stored in: in clear, and its references under every key of the
 * keyring's policy (what the workers stored when the id matched no identifier format).
 */
async function taskForms(ctx: CliContext, task: string): Promise<string[]> {
  const { identifierForms } = await import('../../audit/stored-identifier.js');
  return identifierForms(task, await ctx.auditPolicy());
}
