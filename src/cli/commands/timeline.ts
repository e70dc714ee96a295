import { renderTimeline, timeline } from '../../audit/timeline.js';
import type { CliContext } from '../context.js';
import { notFound, usageError } from '../errors.js';
import { toJson } from '../format.js';
import { normalizeKey } from '../keys.js';

export async function timelineCommand(
  ctx: CliContext,
  taskId: string | undefined,
  opts: { operation?: string; json?: boolean },
): Promise<void> {
  if ((taskId === undefined) === (opts.operation === undefined)) {
    throw usageError('give either a task id or --operation <key>');
  }
  ctx.require('DATABASE_URL');
  const key = taskId === undefined ? normalizeKey(opts.operation as string) : undefined;
  const query = key === undefined ? { taskId: taskId as string } : { operationKey: key };
  const t = await timeline(query, { store: await ctx.store(), ledger: await ctx.ledger() });
  if (t.events.length === 0 && t.finalStates.length === 0) {
    throw notFound(
      key === undefined
        ? 'no audit events for the task id given (not echoed)'
        : `no audit events or ledger record for key ${key}`,
    );
  }
  ctx.io.out(opts.json ? toJson(t) : renderTimeline(t));
}
