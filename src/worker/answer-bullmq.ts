import type { Job } from 'bullmq';
import type { IdentifierStorer } from '../audit/stored-identifier.js';
import {
  IdempotencyConflictError,
  IdempotencyInProgressError,
  RecordedFailureError,
  StaleEpochError,
  UnknownOutcomeError,
} from '../errors/errors.js';
import { IdempotencyError } from '../errors/idempotency-error.js';
import { RetryableError, TerminalError } from '../errors/processor-errors.js';
import type { Downstream, RecordedError } from '../ledger/types.js';
import { DEFAULT_REDACTION_POLICY } from '../redaction/define-policy.js';
import type { RedactedError } from '../redaction/error-shape.js';
import { redactError } from '../redaction/redact-error.js';
import { errorForBullmq, isSealedForBullmq, unrecoverable, withHint } from '../sealing/bullmq-errors.js';
import type { Keyring } from '../sealing/keyring.js';
import { originalError } from '../sealing/original-error.js';
import { recordedError } from '../sealing/sealed-error.js';
import { bullmqSignal, waitAsDelayedJob } from '../shared/bullmq.js';
import type { Logger } from '../shared/logger.js';
import { type LedgerUnreachableError, ledgerBackoff, ledgerUnreachable, type OutcomeRecorder } from './record.js';
import type { AttemptScope, ErrorClass } from './types.js';

// What BullMQ is answered once an attempt has been decided: a processor's error classified and
// recorded, then rethrown as BullMQ should take it; a wait as a delayed job (no attempt used); and
// any other failure as an error whose text is sealed, told once in a warn line.

/** What a processor error means for the ledger ({@link ErrorClass}), by its kind, else by the operation's downstream. */
export function classifyError(err: unknown, downstream: Downstream): ErrorClass {
  try {
    return classifyKnown(err) ?? byDownstream(downstream);
  } catch {
    // A Proxy or a prototype that throws when asked what it is: an error like any other.
    return byDownstream(downstream);
  }
}

/** The class an error's own kind decides, or null when the operation's downstream mode does. */
function classifyKnown(err: unknown): ErrorClass | null {
  const signal = bullmqSignal(err);
  if (signal === 'wait') return 'wait';
  if (signal === 'unrecoverable' || err instanceof TerminalError) return 'terminal';
  if (err instanceof IdempotencyConflictError || err instanceof RecordedFailureError) return 'terminal';
  if (err instanceof UnknownOutcomeError) return 'unknown';
  if (err instanceof RetryableError) return 'retryable';
  return null;
}

function byDownstream(downstream: Downstream): ErrorClass {
  if (downstream === 'idempotent') return 'retryable';
  return downstream === 'reconcile' ? 'reconcile' : 'unknown';
}

/**
 * A processor's terminal error as a library error, so BullMQ's failedReason starts with a code:
 * the {@link RecordedFailureError} every later attempt of the key meets too (same class, same
 * code on the first attempt and on a replay). The library's own errors stay as they are.
 */
export function asRecordedFailure(err: unknown, key: string, error: RecordedError): IdempotencyError {
  if (err instanceof IdempotencyError) return err;
  return new RecordedFailureError({ key, error });
}

/**
 * What an operation's processor error means ({@link classifyError}), recorded, then handed to
 * BullMQ: BullMQ's own signals and retryable errors as they are; a terminal error as an
 * unrecoverable {@link RecordedFailureError} (or the library error it was); an unknown outcome
 * as an unrecoverable {@link UnknownOutcomeError}. Returns only when the reconcile hook found the
 * effect committed: its recorded result.
 */
export async function settleProcessorError(
  recorder: OutcomeRecorder,
  scope: AttemptScope,
  input: unknown,
  epoch: number,
  err: unknown,
  signal: AbortSignal,
): Promise<unknown> {
  // A step that could not reach the ledger (the processor rethrew or wrapped its error): the
  // job waits and runs again; its steps' records tell the next attempt what ran.
  const unreachable = ledgerUnreachable(err);
  if (unreachable) throw unreachable;
  const cls = classifyError(err, recorder.s.op.downstream);
  try {
    if (cls === 'reconcile') {
      const settled = await recorder.reconcile(scope, input, epoch, signal);
      if (settled) return settled.result;
      await recorder.recordError(scope, epoch, err, 'retryable', signal); // not committed: BullMQ retries
      throw err;
    }
    await recorder.recordError(scope, epoch, err, cls, signal);
  } catch (thrown) {
    if (thrown instanceof StaleEpochError) {
      recorder.events.emit(scope, 'stale_completion', 'deny', { epoch, reasonCode: thrown.code });
      throw err; // fenced: another attempt owns the key; BullMQ retries and replays its outcome
    }
    throw thrown;
  }
  if (cls === 'wait' || cls === 'retryable') throw err;
  // BullMQ gets the library's error; `originalError()` gives the processor's back, and the
  // stack BullMQ keeps carries the processor's error sealed.
  const recorded = recordedError(err, recorder.s.keyring, recorder.placeOf(scope));
  const stands = { original: err, ...(recorded.sealed ? { sealed: recorded.sealed } : {}) };
  if (cls === 'terminal') {
    throw bullmqSignal(err) === 'unrecoverable'
      ? err
      : unrecoverable(asRecordedFailure(err, scope.k, recorded), stands);
  }
  throw unrecoverable(isUnknownOutcome(err) ? err : new UnknownOutcomeError({ key: scope.k, epoch }), stands);
}

/** `instanceof` that a Proxy whose traps throw answers with false. */
function isUnknownOutcome(err: unknown): err is UnknownOutcomeError {
  try {
    return err instanceof UnknownOutcomeError;
  } catch {
    return false;
  }
}

/**
 * Another attempt holds the lease of `scope`'s key (the operation's, or a step's): wait as a
 * delayed job ({@link waitAsDelayedJob}: no attempt used, the next attempt claims again), soon
 * (the holder usually finishes well within its lease: `pollMs`), never later than the moment its
 * lease would lapse (`retryAfterMs`), with a little jitter. A job processed without a token
 * (BullMQ gave none) cannot be moved: it throws the reason instead, and BullMQ retries it as it
 * would any error.
 */
export function waitForHolder(scope: AttemptScope, retryAfterMs: number, pollMs: number): Promise<never> {
  if (!scope.token) throw new IdempotencyInProgressError({ key: scope.k, retryAfterMs });
  return waitAsDelayedJob(
    scope.job,
    scope.token,
    Math.max(25, Math.min(retryAfterMs, pollMs)) + Math.floor(Math.random() * 25),
  );
}

/**
 * The ledger could not be asked (a claim, or a write the attempt could not land while it held
 * its lease): the job waits, by the process's backoff, and its next attempt asks the ledger
 * again: it replays, takes over or finds `unknown`, as after a crash.
 */
export function waitForLedger(
  job: Job,
  token: string,
  err: LedgerUnreachableError,
  logger: Logger | undefined,
  ids?: IdentifierStorer,
): Promise<never> {
  const waitMs = ledgerBackoff.next();
  logger?.warn(
    {
      jobId: job.id && ids ? ids('jobId', job.id) : job.id,
      what: err.what,
      code: (err.cause as { code?: unknown } | undefined)?.code,
      waitMs,
      consecutiveFailures: ledgerBackoff.consecutiveFailures,
    },
    'ledger unreachable: job delayed',
  );
  return waitAsDelayedJob(job, token, waitMs);
}

/** What is known of an attempt when it fails: its job always, its key once parsed, its epoch once claimed. */
export type FailedAttemptAt = { job: Job; key?: string | undefined; epoch?: number | undefined };

/** What {@link failedAttempt} needs of the wrapper's options. */
export type FailedAttemptSettings = {
  keyring: Keyring;
  /** The operation's name: error text is sealed for it and the attempt's key. */
  operation: string;
  logger?: Logger | undefined;
  logErrorText?: boolean | undefined;
  /** The job id as the trail tells it (see `identifierAsStored`). @defaultValue as it is */
  ids?: IdentifierStorer | undefined;
};

/** Errors {@link failedAttempt} made: handed on as they are, and told once. */
const TOLD = new WeakSet<object>();

/**
 * How to open the stored copy of a key's error: the CLI's `inspect --decrypt`, which needs the
 * keyring in `BQI_KEYRING` and a reason (both audited). The key is quoted for a POSIX shell.
 */
export function openHint(key: string): string {
  return `open it with BQI_KEYRING set: npx bullmq-idempotency inspect '${key.replaceAll("'", "'\\''")}' --decrypt --reason '<why>'`;
}

/**
 * What BullMQ gets for an attempt that failed, and the one line the developer gets about it.
 * BullMQ's own signals, and a ledger that could not be reached (the runner makes the job wait),
 * go on as they are. Anything else becomes an error made of the code, the class name, the public
 * message (or the sealed marker) and, once the key is known, how to open the stored copy; the
 * error thrown stays reachable in this process through `originalError()`. Each such failure is
 * logged once at `warn` with its code, key, epoch and attempt and the hint; with `logErrorText`,
 * also the original message, causes and first stack frame as the value scanners leave them (a
 * second line of defence, for logs only).
 */
export function failedAttempt(err: unknown, at: FailedAttemptAt, s: FailedAttemptSettings): unknown {
  if (bullmqSignal(err) === 'wait' || ledgerUnreachable(err)) return err;
  if (typeof err === 'object' && err !== null && TOLD.has(err)) return err;
  const hint = at.key === undefined ? undefined : openHint(at.key);
  let handed: Error;
  if (isSealedForBullmq(err)) handed = hint ? withHint(err as Error, hint) : (err as Error);
  else {
    const kind = bullmqSignal(err) === 'unrecoverable' ? 'unrecoverable' : 'retry';
    handed = errorForBullmq(
      recordedError(err, s.keyring, { operation: s.operation, key: at.key ?? '' }),
      err,
      kind,
      hint,
    );
  }
  TOLD.add(handed);
  if (s.logger) tell(s.logger, handed, at, hint, s.logErrorText === true, s.ids);
  return handed;
}

/**
 * The warn line of one failed attempt: always the code, class, key, epoch and attempt; with
 * `errorText`, the original's message, causes and first frame as the scanners leave them. Never
 * throws: the error to hand BullMQ matters more.
 */
function tell(
  logger: Logger,
  handed: Error,
  at: FailedAttemptAt,
  hint: string | undefined,
  errorText: boolean,
  ids: IdentifierStorer | undefined,
): void {
  const attempt = at.job.attemptsMade + 1;
  const line =
    hint && handed.message.endsWith(`; ${hint}`) ? handed.message.slice(0, -hint.length - 2) : handed.message;
  let told: { name?: string; text?: string; frame?: string } = {};
  if (errorText) {
    try {
      told = describe(redactError(originalError(handed), DEFAULT_REDACTION_POLICY, { maxAggregated: 3 }));
    } catch {
      told = { text: '[the error could not be read]' };
    }
  }
  try {
    logger.warn(
      {
        code: (handed as { code?: unknown }).code,
        ...(told.name ? { class: told.name } : {}),
        key: at.key,
        epoch: at.epoch,
        attempt,
        jobId: at.job.id && ids ? ids('jobId', at.job.id, at.key ? { operationId: at.key } : {}) : at.job.id,
        queue: at.job.queueName,
        ...(told.text ? { error: told.text } : {}),
        ...(told.frame ? { at: told.frame } : {}),
        open: hint,
      },
      `attempt ${attempt} failed: ${told.text ?? line}${hint ? `; ${hint}` : ''}`,
    );
  } catch {
    // a logger that throws must not change what BullMQ is told
  }
}

/** `TypeError: fetch failed [cause: Error ENOTFOUND: getaddrinfo ENOTFOUND api.example]` and the first frame. */
function describe(e: RedactedError): { name: string; text: string; frame?: string } {
  const one = (x: RedactedError): string => {
    const head = x.code && x.code !== x.name ? `${x.name} ${x.code}` : x.name;
    const inner = [
      ...(x.errors ?? []).map((i) => `[error: ${one(i)}]`),
      ...(x.cause ? [`[cause: ${one(x.cause)}]`] : []),
    ];
    return [`${head}: ${x.message}`, ...inner].join(' ');
  };
  const frame = firstFrame(e.stack);
  return frame === undefined ? { name: e.name, text: one(e) } : { name: e.name, text: one(e), frame };
}

/** The first frame of a stack outside Node's own modules (the first one when all are). */
function firstFrame(stack: string | undefined): string | undefined {
  const frames = (stack ?? '').split('\n').filter((l) => /^\s+at /.test(l));
  const frame = frames.find((l) => !/\(?node:/.test(l)) ?? frames[0];
  return frame?.trim();
}
