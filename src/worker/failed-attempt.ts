import type { Job } from 'bullmq';
import type { IdentifierStorer } from '../audit/stored-identifier.js';
import { DEFAULT_REDACTION_POLICY } from '../redaction/define-policy.js';
import type { RedactedError } from '../redaction/error-shape.js';
import { redactError } from '../redaction/redact-error.js';
import { bullmqSignal, errorForBullmq, isSealedForBullmq, withHint } from '../sealing/bullmq-signals.js';
import type { Keyring } from '../sealing/keyring.js';
import { originalError } from '../sealing/original-error.js';
import { recordedError } from '../sealing/sealed-error.js';
import type { Logger } from '../shared/logger.js';
import { ledgerUnreachable } from './ledger-unreachable.js';

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
