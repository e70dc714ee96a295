import type { WrapperEvent } from '../shared/wrapper-event.js';

/** The phases of an attempt an observer can time and trace. */
export type AttemptPhase = 'claim' | 'run' | 'complete' | 'replay';

/** What the wrapper knows of an attempt when a phase starts. */
export type PhaseInfo = {
  operation: string;
  /** The bounded key string. */
  key: string;
  queue?: string;
  jobId?: string;
  /** The fencing epoch, once the claim gave one. */
  epoch?: number;
  attemptsMade: number;
};

/** Facts learnt during a phase (`outcome` of a claim), for spans and labels. */
export type PhaseFacts = { set(facts: Record<string, string | number | boolean>): void };

/**
 * How a claim was answered, the `outcome` fact of a `claim` phase: `acquired` (fresh, or after
 * a release, an expiry or an invalidation), `takeover` (an expired lease taken over),
 * `replayed` (a recorded result returned), `conflict` (same key, other input), `in_progress`
 * (another attempt holds the lease: the job waits), `recorded_failure`, `unknown`.
 */
export type ClaimOutcomeLabel =
  | 'acquired'
  | 'takeover'
  | 'replayed'
  | 'conflict'
  | 'in_progress'
  | 'recorded_failure'
  | 'unknown';

/**
 * What `withIdempotency` reports beside its audit events, for metrics and traces
 * (`createIdempotencyMetrics()`, `createIdempotencyTracing()`, or your own). Every member is
 * optional; an observer must not throw (what it throws is ignored) and never sees input,
 * results or error text.
 */
export type IdempotencyObserver = {
  /** Every ledger transition and decision of the wrapper: the events its audit sink gets. */
  event?(event: WrapperEvent): void;
  /**
   * Runs one phase of an attempt: call `fn` exactly once and return (or throw) what it does. A
   * tracer opens a span around it; metrics time it.
   */
  phase?<T>(phase: AttemptPhase, info: PhaseInfo, fn: (facts: PhaseFacts) => Promise<T>): Promise<T>;
};

const ignore: PhaseFacts = { set: () => {} };

/**
 * One observer of several: events go to each, phases nest (the first observer's span is the
 * outermost) and facts reach every one of them.
 */
export function combineObservers(...observers: (IdempotencyObserver | undefined)[]): IdempotencyObserver {
  const list = observers.filter((o): o is IdempotencyObserver => o !== undefined);
  return {
    event(event) {
      for (const o of list) observeEvent(o, event);
    },
    phase(phase, info, fn) {
      const nest = <T>(i: number, facts: PhaseFacts[], inner: (f: PhaseFacts) => Promise<T>): Promise<T> => {
        if (i === list.length) {
          return inner({
            set: (f) => {
              for (const x of facts) x.set(f);
            },
          });
        }
        return runPhase(list[i], phase, info, (f) => nest(i + 1, [...facts, f], inner));
      };
      return nest(0, [], fn);
    },
  };
}

/**
 * Runs `fn` as a phase of `observer` (or alone without one). `fn` runs exactly once and its
 * outcome is what the caller gets, whatever the observer does: an observer that throws before
 * running it is skipped, one that throws after it is ignored.
 */
export async function runPhase<T>(
  observer: IdempotencyObserver | undefined,
  phase: AttemptPhase,
  info: PhaseInfo,
  fn: (facts: PhaseFacts) => Promise<T>,
): Promise<T> {
  if (!observer?.phase) return fn(ignore);
  let outcome: { ok: true; value: T } | { ok: false; error: unknown } | undefined;
  const once = async (facts: PhaseFacts): Promise<T> => {
    if (outcome) throw new Error(`the observer ran the ${phase} phase twice`);
    try {
      const value = await fn(facts);
      outcome = { ok: true, value };
      return value;
    } catch (error) {
      outcome = { ok: false, error };
      throw error;
    }
  };
  try {
    await observer.phase(phase, info, once);
  } catch {
    // the outcome below is fn's, not the observer's
  }
  if (!outcome) return fn(ignore);
  if (outcome.ok) return outcome.value;
  throw outcome.error;
}

/** Hands `event` to `observer`, ignoring what it throws. */
export function observeEvent(observer: IdempotencyObserver | undefined, event: WrapperEvent): void {
  try {
    observer?.event?.(event);
  } catch {
    // an observer's failure is never the job's
  }
}
