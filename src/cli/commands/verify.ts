import { readFileSync } from 'node:fs';
import { type ChainHead, exportChainHeads, verifyAuditChains } from '../../audit/verify-chain.js';
import type { CliContext } from '../context.js';
import { CliError, EXIT, usageError } from '../errors.js';
import { toJson } from '../format.js';

/**
 * `verify`: walks the audit trail's hash chains and names the first event changed, removed or
 * inserted out of order (exit 1), or prints the chains' heads (`--heads`) to anchor elsewhere.
 */
export async function verifyCommand(
  ctx: CliContext,
  opts: { heads?: boolean; anchors?: string; json?: boolean },
): Promise<void> {
  ctx.require('DATABASE_URL');
  const pool = await ctx.pool();
  if (opts.heads) {
    ctx.io.out(toJson(await exportChainHeads(pool, ctx.schema)));
    return;
  }
  const anchors = opts.anchors === undefined ? undefined : readAnchors(opts.anchors);
  const result = await verifyAuditChains(pool, ctx.schema, anchors ? { anchors } : {});
  if (opts.json) ctx.io.out(toJson(result));
  else if (result.ok) ctx.io.out(`ok: ${result.events} events in ${result.chains} chains`);
  if (!result.ok) {
    const first = result.problems[0];
    throw new CliError(
      EXIT.failure,
      `${result.problems.length} problem(s) in the audit chains; first: event ${first?.eventId ?? '(none)'} ${first?.kind} (chain ${first?.chain}, place ${first?.seq ?? '-'}: ${first?.message})`,
    );
  }
}

function readAnchors(file: string): ChainHead[] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(file, 'utf8'));
  } catch {
    throw usageError(`--anchors: ${file} is not a readable JSON file (the output of verify --heads)`);
  }
  const ok =
    Array.isArray(parsed) &&
    parsed.every(
      (h) =>
        typeof h === 'object' &&
        h !== null &&
        typeof h.chain === 'string' &&
        Number.isSafeInteger(h.seq) &&
        typeof h.digest === 'string',
    );
  if (!ok) throw usageError(`--anchors: ${file} is not a list of chain heads (the output of verify --heads)`);
  return parsed as ChainHead[];
}
