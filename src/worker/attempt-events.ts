import { TRANSITIONS, type TransitionSpec } from '../ledger/transitions.js';
import type { Transition } from '../ledger/types.js';
import type { AuditSink, WrapperEvent, WrapperEventType } from '../shared/wrapper-event.js';
import type { EventScope } from './attempt-scope.js';

/**
 * Builds the audit events of one operation's attempts and hands them to the sink. Every ledger
 * transition an attempt makes or finds is reported here, for the operation and its steps alike.
 */
export class AttemptEvents {
  constructor(
    private readonly operation: string,
    private readonly sink: AuditSink | undefined,
  ) {}

  /**
   * Reports the event of a ledger transition the attempt made or found: its type, decision and
   * default reason code are the transition table's (`TRANSITIONS`), the ones the backfill derives
   * from the ledger's record of it, so the live event and the derived one are the same event.
   */
  transition(scope: EventScope, name: Transition, extra: Partial<WrapperEvent> = {}): void {
    const spec: TransitionSpec = TRANSITIONS[name];
    const reasonCode = extra.reasonCode ?? spec.reasonCode;
    void this.emit(scope, spec.event, spec.decision, reasonCode ? { ...extra, reasonCode } : extra);
  }

  /**
   * Reports one event. Returns the sink's promise (durable), which only `ctx.audit()` awaits: the
   * ledger records the wrapper's own transitions, so their events are never waited for.
   */
  emit(
    scope: EventScope,
    type: WrapperEventType,
    decision: WrapperEvent['decision'],
    extra: Partial<WrapperEvent> = {},
  ): void | Promise<void> {
    const sink = this.sink;
    if (!sink) return;
    const event: WrapperEvent = {
      type,
      operation: this.operation,
      decision,
      queue: scope.job.queueName,
      attemptsMade: scope.facts.attemptsMade,
      attemptsStarted: scope.facts.attemptsStarted,
      stalledCounter: scope.facts.stalledCounter,
      ...extra,
      // Database time of the transition when the ledger gave one; otherwise the time of emission.
      at: extra.at ?? new Date(),
    };
    // Assigned rather than spread: this runs for every transition of every job.
    if (scope.k) event.key = scope.k;
    if (scope.parentK) event.parentKey = scope.parentK;
    if (scope.stepId) event.stepId = scope.stepId;
    if (scope.job.id) event.jobId = scope.job.id;
    if (scope.taskId) event.taskId = scope.taskId;
    return sink.emit(event);
  }
}
