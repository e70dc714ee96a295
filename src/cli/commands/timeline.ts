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
  const query = taskId !== undefined ? { taskId } : { operationKey: normalizeKey(opts.operation as string) };
  const t = await timeline(query, { store: await ctx.store(), ledger: await ctx.ledger() });
  if (t.events.length === 0 && t.finalStates.length === 0) {
    throw notFound(
      taskId !== undefined
        ? `no audit events for task ${taskId}`
        : `no audit events or ledger record for ${opts.operation}`,
    );
  }
  ctx.io.out(opts.json ? toJson(t) : renderTimeline(t));
}
