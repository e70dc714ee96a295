import { errorLabel } from '../errors/clean-name.js';
import type { AttemptPhase, IdempotencyObserver, PhaseFacts, PhaseInfo } from './observer.js';

/** The part of an OpenTelemetry `Span` the tracing uses (structural: no import of the API). */
export type SpanLike = {
  setAttribute(key: string, value: string | number | boolean): unknown;
  setStatus(status: { code: number; message?: string }): unknown;
  addEvent(name: string, attributes?: Record<string, string | number | boolean>): unknown;
  end(): void;
};

/** The part of an OpenTelemetry `Tracer` the tracing uses: `trace.getTracer(name)` fits. */
export type TracerLike = {
  startActiveSpan<F extends (span: SpanLike) => unknown>(
    name: string,
    options: { attributes?: Record<string, string | number | boolean> },
    fn: F,
  ): ReturnType<F>;
};

/** `SpanStatusCode.ERROR` of `@opentelemetry/api`. */
const STATUS_ERROR = 2;

/** The tracer's name when the tracing finds `@opentelemetry/api` by itself. */
export const TRACER_NAME = 'bullmq-idempotency';

export type IdempotencyTracingOptions = {
  /**
   * The tracer spans are started with. Without one, `@opentelemetry/api` is imported on first
   * use (`trace.getTracer('bullmq-idempotency')`, which follows the global provider); when it is
   * not installed, phases run untraced.
   */
  tracer?: TracerLike;
};

type LoadedApi = { trace: { getTracer(name: string): TracerLike } };

/** `@opentelemetry/api`, an optional peer dependency: undefined when the application lacks it. */
async function loadTracer(): Promise<TracerLike | undefined> {
  const specifier = '@opentelemetry/api';
  try {
    const api = (await import(specifier)) as LoadedApi;
    return api.trace.getTracer(TRACER_NAME);
  } catch {
    return undefined;
  }
}

/**
 * OpenTelemetry spans for the phases of an attempt, as an observer for
 * `withIdempotency({ observer })`: `idempotency.claim` (attribute `idempotency.outcome`),
 * `idempotency.run` (the processor), `idempotency.complete` and `idempotency.replay`, each with
 * `idempotency.operation`, `idempotency.key`, `messaging.destination.name` (the queue) and, once
 * known, `idempotency.epoch`. Spans start in the active context, so with BullMQ's `telemetry`
 * option (`bullmq-otel`) and a context manager they nest under BullMQ's `process <queue>` span.
 * A failed phase gets the error status and an `exception` event carrying the error's code or
 * class name only: messages and stacks can hold what the processor was given, so they are never
 * recorded.
 *
 * @example
 * import { BullMQOtel } from 'bullmq-otel';
 * const observer = createIdempotencyTracing();     // uses the global tracer provider
 * new Worker('payments', withIdempotency(charge, processor, { ledger, keyring, observer }), {
 *   connection, telemetry: new BullMQOtel('payments-worker'),
 * });
 */
export class IdempotencyTracing implements IdempotencyObserver {
  private tracer: Promise<TracerLike | undefined> | TracerLike | undefined;

  constructor(options: IdempotencyTracingOptions = {}) {
    this.tracer = options.tracer;
  }

  private resolveTracer(): Promise<TracerLike | undefined> | TracerLike | undefined {
    this.tracer ??= loadTracer();
    return this.tracer;
  }

  async phase<T>(phase: AttemptPhase, info: PhaseInfo, fn: (facts: PhaseFacts) => Promise<T>): Promise<T> {
    const tracer = await this.resolveTracer();
    if (!tracer) return fn({ set: () => {} });
    const attributes: Record<string, string | number | boolean> = {
      'idempotency.operation': info.operation,
      'idempotency.key': info.key,
      'idempotency.attempts_made': info.attemptsMade,
      ...(info.queue ? { 'messaging.destination.name': info.queue } : {}),
      ...(info.jobId ? { 'messaging.message.id': info.jobId } : {}),
      ...(info.epoch !== undefined ? { 'idempotency.epoch': info.epoch } : {}),
    };
    return tracer.startActiveSpan(`idempotency.${phase}`, { attributes }, async (span: SpanLike) => {
      const facts: PhaseFacts = {
        set: (f) => {
          for (const [k, v] of Object.entries(f)) span.setAttribute(`idempotency.${k}`, v);
        },
      };
      try {
        return await fn(facts);
      } catch (err) {
        const label = errorLabel(err);
        span.addEvent('exception', { 'exception.type': label });
        span.setStatus({ code: STATUS_ERROR, message: label });
        throw err;
      } finally {
        span.end();
      }
    });
  }
}

/** {@link IdempotencyTracing} for `withIdempotency({ observer })`. */
export function createIdempotencyTracing(options: IdempotencyTracingOptions = {}): IdempotencyTracing {
  return new IdempotencyTracing(options);
}
