import { boundedKey } from '../keys/idempotency-key.js';
import type { PostgresLedger } from '../ledger/postgres-ledger.js';
import type { AuditSink } from '../shared/wrapper-event.js';
import { type ClaimOutcomeLabel, type IdempotencyObserver, observeEvent, runPhase } from './observer.js';

type Claim = Awaited<ReturnType<PostgresLedger['claim']>>;

const keyString = (key: Parameters<PostgresLedger['complete']>[0]) => (typeof key === 'string' ? key : boundedKey(key));

function outcomeOf(claim: Claim): ClaimOutcomeLabel {
  switch (claim.kind) {
    case 'acquired':
      return claim.transition === 'takeover' ? 'takeover' : 'acquired';
    case 'completed':
      return 'replayed';
    case 'inProgress':
      return 'in_progress';
    case 'failed':
      return 'recorded_failure';
    default:
      return claim.kind;
  }
}

/**
 * The ledger as the wrapper sees it under an observer: `claim` runs as the `claim` phase (its
 * outcome a fact), a claim that finds a completed record is followed by the `replay` phase, and
 * `complete` runs as the `complete` phase. Everything else is the ledger itself (its prototype).
 */
export function observedLedger(
  ledger: PostgresLedger,
  operation: string,
  observer: IdempotencyObserver,
): PostgresLedger {
  const view = Object.create(ledger) as PostgresLedger;
  view.claim = async (options) => {
    const info = {
      // The operation's declared name, also for a step's claim (whose ledger operation is
      // `<name>#<step>`): step names are data (one per recipient, say), never a label.
      operation,
      key: boundedKey(options.key),
      attemptsMade: 0,
      ...(options.queue ? { queue: options.queue } : {}),
      ...(options.jobId ? { jobId: options.jobId } : {}),
    };
    const claim = await runPhase(observer, 'claim', info, async (facts) => {
      const c = await ledger.claim(options);
      facts.set({ outcome: outcomeOf(c) });
      return c;
    });
    if (claim.kind !== 'completed') return claim;
    return runPhase(observer, 'replay', { ...info, epoch: claim.epoch }, async () => claim);
  };
  view.complete = (async (key, epoch, ...rest) =>
    runPhase(observer, 'complete', { operation, key: keyString(key), epoch, attemptsMade: 0 }, () =>
      ledger.complete(key, epoch, ...rest),
    )) as PostgresLedger['complete'];
  return view;
}

/** The audit sink that also tells the observer every event (the observer alone without a sink). */
export function observedSink(sink: AuditSink | undefined, observer: IdempotencyObserver): AuditSink {
  return {
    emit(event) {
      observeEvent(observer, event);
      return sink?.emit(event) as Promise<void>;
    },
  };
}
