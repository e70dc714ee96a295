import { boundedKey } from '../keys/idempotency-key.js';
import type { AttemptLedger } from '../ledger/postgres-ledger.js';
import type { ClaimOptions } from '../ledger/types.js';
import type { AuditSink } from '../shared/wrapper-event.js';
import { type ClaimOutcomeLabel, type IdempotencyObserver, observeEvent, runPhase } from './observer.js';

type Claim = Awaited<ReturnType<AttemptLedger['claim']>>;

const keyString = (key: Parameters<AttemptLedger['complete']>[0]) => (typeof key === 'string' ? key : boundedKey(key));

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
 * `complete` runs as the `complete` phase. Every other member is the ledger's own, passed through.
 */
export class ObservedLedger implements AttemptLedger {
  constructor(
    private readonly ledger: AttemptLedger,
    private readonly operation: string,
    private readonly observer: IdempotencyObserver,
  ) {}

  get schema(): string {
    return this.ledger.schema;
  }

  get pool(): AttemptLedger['pool'] {
    return this.ledger.pool;
  }

  get db(): AttemptLedger['db'] {
    return this.ledger.db;
  }

  async claim(options: ClaimOptions): Promise<Claim> {
    const info = {
      // The operation's declared name, also for a step's claim (whose ledger operation is
      // `<name>#<step>`): step names are data (one per recipient, say), never a label.
      operation: this.operation,
      key: boundedKey(options.key),
      attemptsMade: 0,
      ...(options.queue ? { queue: options.queue } : {}),
      ...(options.jobId ? { jobId: options.jobId } : {}),
    };
    const claim = await runPhase(this.observer, 'claim', info, async (facts) => {
      const c = await this.ledger.claim(options);
      facts.set({ outcome: outcomeOf(c) });
      return c;
    });
    if (claim.kind !== 'completed') return claim;
    return runPhase(this.observer, 'replay', { ...info, epoch: claim.epoch }, async () => claim);
  }

  complete(...args: Parameters<AttemptLedger['complete']>): ReturnType<AttemptLedger['complete']> {
    const [key, epoch] = args;
    const info = { operation: this.operation, key: keyString(key), epoch, attemptsMade: 0 };
    return runPhase(this.observer, 'complete', info, () => this.ledger.complete(...args));
  }

  fail(...args: Parameters<AttemptLedger['fail']>): ReturnType<AttemptLedger['fail']> {
    return this.ledger.fail(...args);
  }

  release(...args: Parameters<AttemptLedger['release']>): ReturnType<AttemptLedger['release']> {
    return this.ledger.release(...args);
  }

  markUnknown(...args: Parameters<AttemptLedger['markUnknown']>): ReturnType<AttemptLedger['markUnknown']> {
    return this.ledger.markUnknown(...args);
  }

  recordLost(...args: Parameters<AttemptLedger['recordLost']>): ReturnType<AttemptLedger['recordLost']> {
    return this.ledger.recordLost(...args);
  }

  heartbeat(...args: Parameters<AttemptLedger['heartbeat']>): ReturnType<AttemptLedger['heartbeat']> {
    return this.ledger.heartbeat(...args);
  }

  get(...args: Parameters<AttemptLedger['get']>): ReturnType<AttemptLedger['get']> {
    return this.ledger.get(...args);
  }
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
