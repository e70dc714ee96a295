import { Counter, Histogram, type Metric, Registry } from 'prom-client';
import type { WrapperEvent } from '../shared/wrapper-event.js';
import type { AttemptPhase, IdempotencyObserver, PhaseFacts, PhaseInfo } from './observer.js';

/** Prefix of every metric the library registers. */
export const DEFAULT_METRICS_PREFIX = 'bullmq_idempotency_';

/** Buckets of the phase durations, in seconds: 1 ms to 30 s. */
const PHASE_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

/** The metric of that name already in `registry` (another worker's), else a new one. */
function shared<M extends Metric>(registry: Registry, name: string, make: () => M): M {
  return (registry.getSingleMetric(name) as M | undefined) ?? make();
}

/** A counter of that name on `registry`: the one already there, else a new one. */
function counter<L extends string>(registry: Registry, name: string, labelNames: L[], help: string): Counter<L> {
  return shared(registry, name, () => new Counter({ name, help, labelNames, registers: [registry] }));
}

const CLAIMS_HELP = 'Claims of operation keys, by how the ledger answered (replayed, conflict, in_progress: waits…)';
const EVENTS_HELP = 'Ledger transitions and decisions reported by the wrapper, by type';
const UNKNOWN_HELP = 'Attempts that met or left an operation whose outcome is unknown (an operator resolves it)';

export type IdempotencyMetricsOptions = {
  /** Where the metrics are registered. @defaultValue a new `Registry` */
  registry?: Registry;
  /** @defaultValue `'bullmq_idempotency_'` */
  prefix?: string;
};

/**
 * Prometheus metrics of the workers, as an observer for `withIdempotency({ observer })`. Labels
 * are the operation name and an outcome, never keys or job ids (their number is unbounded).
 * Several instances on one registry (one per worker) share its metrics.
 *
 * - `bullmq_idempotency_claims_total{operation,outcome}`: claims by how they were answered
 *   (`acquired`, `takeover`, `replayed`, `conflict`, `in_progress`, `recorded_failure`,
 *   `unknown`): replays, conflicts and in-progress waits are its outcomes.
 * - `bullmq_idempotency_events_total{operation,type}`: every ledger transition and decision the
 *   wrapper reports (`completed`, `failed`, `released`, `unknown`, …), as the audit trail gets them.
 * - `bullmq_idempotency_unknown_total{operation}`: attempts that met or left an unknown outcome.
 * - `bullmq_idempotency_phase_duration_seconds{operation,phase,result}`: claim, run, complete
 *   and replay, `result` `ok` or `error`.
 *
 * @example
 * const metrics = createIdempotencyMetrics({ registry });      // your prom-client registry
 * new Worker('payments', withIdempotency(charge, processor, { ledger, keyring, observer: metrics }), { connection });
 * // serve `await registry.metrics()` with `registry.contentType` at /metrics
 */
export class IdempotencyMetrics implements IdempotencyObserver {
  readonly registry: Registry;
  private readonly claims: Counter<'operation' | 'outcome'>;
  private readonly events: Counter<'operation' | 'type'>;
  private readonly unknown: Counter<'operation'>;
  private readonly durations: Histogram<'operation' | 'phase' | 'result'>;

  constructor(options: IdempotencyMetricsOptions = {}) {
    this.registry = options.registry ?? new Registry();
    const p = options.prefix ?? DEFAULT_METRICS_PREFIX;
    const r = this.registry;
    this.claims = counter(r, `${p}claims_total`, ['operation', 'outcome'], CLAIMS_HELP);
    this.events = counter(r, `${p}events_total`, ['operation', 'type'], EVENTS_HELP);
    this.unknown = counter(r, `${p}unknown_total`, ['operation'], UNKNOWN_HELP);
    this.durations = shared(
      r,
      `${p}phase_duration_seconds`,
      () =>
        new Histogram({
          name: `${p}phase_duration_seconds`,
          help: 'Duration of the phases of an attempt: claim, run (the processor), complete, replay',
          labelNames: ['operation', 'phase', 'result'],
          buckets: PHASE_BUCKETS,
          registers: [r],
        }),
    );
  }

  event(event: WrapperEvent): void {
    this.events.inc({ operation: event.operation, type: event.type });
    if (event.type === 'unknown') this.unknown.inc({ operation: event.operation });
  }

  async phase<T>(phase: AttemptPhase, info: PhaseInfo, fn: (facts: PhaseFacts) => Promise<T>): Promise<T> {
    let outcome: string | undefined;
    const facts: PhaseFacts = {
      set: (f) => {
        if (typeof f.outcome === 'string') outcome = f.outcome;
      },
    };
    const end = this.durations.startTimer({ operation: info.operation, phase });
    try {
      const value = await fn(facts);
      end({ result: 'ok' });
      return value;
    } catch (err) {
      end({ result: 'error' });
      throw err;
    } finally {
      if (phase === 'claim' && outcome) this.claims.inc({ operation: info.operation, outcome });
    }
  }

  /** The text exposition of the registry, for a `/metrics` route of your own. */
  async render(): Promise<{ contentType: string; body: string }> {
    return { contentType: this.registry.contentType, body: await this.registry.metrics() };
  }
}

/** {@link IdempotencyMetrics} for `withIdempotency({ observer })`. */
export function createIdempotencyMetrics(options: IdempotencyMetricsOptions = {}): IdempotencyMetrics {
  return new IdempotencyMetrics(options);
}
