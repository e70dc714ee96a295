/**
 * `resolve`: settles a key whose outcome is unknown, as committed (the found result sealed for
 * the key's row, replays return it) or not committed (the next claim runs again). A module per
 * command, so running one loads only what it needs.
 */
import { IllegalTransitionError, InvalidInputError } from '../../errors/errors.js';
import type { LedgerRecord } from '../../ledger/types.js';
import { resolvedResult } from '../../operation/resolved-result.js';
import type { Keyring } from '../../sealing/keyring.js';
import { actorLabel } from '../actor.js';
import type { CliContext } from '../context.js';
import { CliError, EXIT, usageError } from '../errors.js';
import { toJson } from '../format.js';
import { getRecord, normalizeKey } from '../keys.js';
import type { OperatorAction } from '../operator-audit.js';
import { operatorOptions, storedOrExplain } from '../operator-event-store.js';

export type ResolveCommandOptions = {
  committed?: boolean;
  notCommitted?: boolean;
  /** The result as JSON text; parsed here, so a parse error never quotes it. */
  result?: string;
  /** Top-level fields of the result kept in clear beside `$sealed`, comma-separated: the operation's `publicResult`. */
  public?: string;
  reason: string;
  actor: string;
  json?: boolean;
};

export async function resolveCommand(ctx: CliContext, keyArg: string, opts: ResolveCommandOptions): Promise<void> {
  if (!opts.committed && !opts.notCommitted) {
    throw new CliError(EXIT.usage, 'say what happened: --committed --result <json>, or --not-committed');
  }
  if (opts.committed && opts.result === undefined) {
    throw new CliError(EXIT.usage, '--committed needs --result <json>: the result a replay will return');
  }
  if (opts.notCommitted && opts.result !== undefined) {
    throw new CliError(EXIT.usage, '--result goes with --committed only');
  }
  if (opts.public !== undefined && !opts.committed) throw usageError('--public goes with --committed only');
  const value = opts.result === undefined ? undefined : parseResult(opts.result);
  const publicFields = opts.public === undefined ? [] : parsePublic(opts.public);
  // The result is recorded sealed, as the wrapper records one: without the keyring, nothing is.
  const keyring = opts.committed
    ? ctx.keyring('resolve --committed: the result is sealed with its current key before it is recorded')
    : undefined;
  const key = normalizeKey(keyArg);
  ctx.require('DATABASE_URL');
  const { assertAuditable } = await import('../operator-audit.js');
  const ledger = await ctx.ledger();
  const record = await getRecord(ctx, key);
  const committed = Boolean(opts.committed);
  if (record.status !== 'unknown') {
    throw new CliError(
      EXIT.illegalTransition,
      `cannot resolve ${key}: it is ${record.status} (epoch ${record.epoch}), not unknown. ` +
        'resolve only settles an unknown outcome; `invalidate` forces the next attempt to execute again',
    );
  }
  // Sealed as the operation's completion seals it when --public names its publicResult fields.
  const result = keyring ? sealFound(record, value, keyring, publicFields) : undefined;
  const action: Omit<OperatorAction, 'receipt'> = {
    type: 'resolved',
    record,
    actorId: opts.actor,
    reason: opts.reason,
    reasonCode: committed ? 'OPERATOR_RESOLVED_COMMITTED' : 'OPERATOR_RESOLVED_NOT_COMMITTED',
    afterStatus: committed ? 'completed' : 'released',
  };
  assertAuditable(action);
  const { resolveKey } = await import('../../audit/operator-actions.js');
  let receipt: Awaited<ReturnType<typeof resolveKey>>;
  try {
    receipt = await resolveKey(ledger, key, result ? { committed: true, result } : { committed: false }, {
      ...operatorOptions(opts),
      store: await ctx.store(),
    });
  } catch (err) {
    if (err instanceof IllegalTransitionError && err.details.from !== null) {
      // Someone else settled it between our read and the write.
      throw new CliError(EXIT.illegalTransition, `cannot resolve ${key}: it is now ${err.details.from}, not unknown`);
    }
    throw err;
  }
  const eventId = storedOrExplain(receipt, `${key} was resolved`);
  if (opts.json) {
    ctx.io.out(
      toJson({
        key,
        committed,
        ...(committed ? { public: publicFields } : {}),
        status: action.afterStatus,
        epoch: receipt.epoch,
        at: receipt.at,
        auditEventId: eventId,
      }),
    );
  } else {
    ctx.io.out(
      committed
        ? `resolved ${key} as committed: completed at epoch ${receipt.epoch}; replays return the given result`
        : `resolved ${key} as not committed: released at epoch ${receipt.epoch}; the next claim executes again`,
    );
    if (committed) {
      ctx.io.out(
        publicFields.length > 0
          ? `in clear beside the sealed copy: ${publicFields.join(', ')}`
          : "no field in clear: replays hold the result only sealed (--public names the operation's publicResult fields)",
      );
    }
    ctx.io.out(`audit event ${eventId} (actor ${actorLabel(opts.actor)})`);
  }
}

/** `--public a,b`: distinct, non-empty field names. */
function parsePublic(text: string): string[] {
  const fields = text.split(',').map((f) => f.trim());
  if (fields.some((f) => f === '') || new Set(fields).size !== fields.length) {
    throw usageError(
      '--public takes distinct top-level field names of --result, comma-separated: --public chargeId,status',
    );
  }
  return fields;
}

/** The found result sealed for the record's row; public fields that are not the result's are refused, never echoed. */
function sealFound(record: LedgerRecord, value: unknown, keyring: Keyring, publicFields: string[]): unknown {
  try {
    return resolvedResult(record, value, keyring, { publicFields });
  } catch (err) {
    if (!(err instanceof InvalidInputError)) throw err;
    const wrong = err.details.issues.length;
    throw usageError(
      `--public names ${wrong} field(s) that are not top-level fields of --result with a value (a JSON object): nothing was recorded`,
    );
  }
}

/** The operator's result: JSON, which the error never quotes (it may be what the key must keep). */
function parseResult(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    throw usageError(`--result is not JSON (${text.length} characters); quote strings: '"done"'`);
  }
}
