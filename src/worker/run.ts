import type { Kysely, Transaction } from 'kysely';
import { awaitConfirmation } from '../confirm/await-confirmation.js';
import { ConfirmationStore } from '../confirm/confirmation-store.js';
import type { ConfirmationDecision, ConfirmRequest } from '../confirm/types.js';
import { isInfraError } from '../db/unreachable.js';
import { IdempotencyInProgressError, IllegalTransitionError, UnknownOutcomeError } from '../errors/errors.js';
import { isIdempotencyError } from '../errors/idempotency-error.js';
import { fingerprint } from '../fingerprint/fingerprint.js';
import { boundedKey, parseIdempotencyKey } from '../keys/idempotency-key.js';
import { retryWindowMs } from '../operation/retry-window.js';
import { unrecoverable } from '../sealing/bullmq-errors.js';
import { openResult } from '../sealing/sealed-result.js';
import { classifyError } from './answer-bullmq.js';
import { claimKey, claimOptions, decideClaim } from './claim.js';
import { LeaseKeeper } from './lease-keeper.js';
import { ledgerBackoff, type OutcomeRecorder } from './record.js';
import type {
  Acquired,
  AttemptScope,
  ContextState,
  DecisionInput,
  ProcessorContext,
  RunnerSettings,
  StepContext,
} from './types.js';

// Running the processor while the attempt holds its lease: the context it is handed (`tx`,
// `step`, `audit`, `confirm`, `signal`), and each step it runs under a lease of its own.

/** The state of an attempt whose processor has not used its context yet. */
export function newContextState(): ContextState {
  return { recorded: undefined, txUnreachable: undefined, held: undefined, decisions: 0 };
}

/** Everything a processor's context is made of for one attempt that holds the lease. */
export type ContextInput = {
  scope: AttemptScope;
  /** The fingerprint the attempt claimed with; its steps' fingerprints derive from it. */
  fingerprint: string;
  claim: Acquired;
  keeper: LeaseKeeper;
  state: ContextState;
};

/**
 * Builds the {@link ProcessorContext} of each attempt: its facts, and the methods (`tx`, `step`,
 * `audit`) through which a processor reaches the ledger and the audit trail. A new context
 * method is one property of {@link ProcessorContextFactory.create}; what it learns for the
 * attempt goes in {@link ContextState}.
 */
export class ProcessorContextFactory<DB> {
  private store: ConfirmationStore | undefined;

  constructor(
    private readonly s: RunnerSettings<DB>,
    private readonly recorder: OutcomeRecorder,
    readonly steps: StepRunner,
  ) {}

  /** The confirmation requests, in the ledger's database (made on first use). */
  confirmations(): ConfirmationStore {
    const { ledger } = this.s.options;
    this.store ??= new ConfirmationStore(ledger.pool, ledger.schema);
    return this.store;
  }

  create(input: ContextInput): ProcessorContext<DB> {
    return new AttemptContext(this, input);
  }

  /** `ctx.tx`: `fn`'s writes and the ledger's completion commit in one transaction, or neither. */
  async tx<T>({ scope, claim, state }: ContextInput, fn: (trx: Transaction<DB>) => Promise<T>): Promise<T> {
    if (state.recorded) {
      throw new IllegalTransitionError({ key: scope.k, from: 'completed', action: 'open a second ctx.tx' });
    }
    const { ledger } = this.s.options;
    let value!: T;
    let done: Awaited<ReturnType<typeof ledger.complete>>;
    try {
      done = await this.s.db.transaction().execute(async (trx) => {
        value = await fn(trx);
        // Fenced like any completion: a stale epoch rolls back fn's writes with it.
        const sealed = this.recorder.sealValue(scope, value);
        return ledger.complete(scope.k, claim.epoch, sealed, trx as unknown as Kysely<unknown>);
      });
    } catch (err) {
      // Committed with the completion or not at all: the next attempt finds which.
      if (isInfraError(err)) state.txUnreachable ??= err;
      throw err;
    }
    ledgerBackoff.reset();
    state.recorded = done; // only once the transaction has committed
    this.recorder.events.transition(scope, 'completed', { epoch: claim.epoch, at: done.at });
    return value;
  }

  /** `ctx.confirm`: the answer, or the request recorded and the job parked (see awaitConfirmation). */
  confirm(scope: AttemptScope, epoch: number, request: ConfirmRequest): Promise<ConfirmationDecision> {
    const { op, options } = this.s;
    return awaitConfirmation(
      {
        store: this.confirmations(),
        keyring: this.s.keyring,
        ids: this.s.ids,
        emit: (kind, c) =>
          this.recorder.events.emit(scope, 'confirmation', kind === 'requested' ? 'pending_confirmation' : 'allow', {
            epoch,
            confirmation: { kind, request: c },
          }),
        ...(options.logger ? { logger: options.logger } : {}),
      },
      {
        op,
        operationKey: scope.k,
        epoch,
        job: scope.job,
        token: scope.token,
        taskId: scope.taskId,
        retryWindowMs: retryWindowMs(scope.job.opts ?? {}, options.worker, op.retryWindow),
      },
      request,
    );
  }

  /** `ctx.audit`: the sink's own promise (already handled: not awaiting it reports no rejection), or a resolved one. */
  audit(scope: AttemptScope, epoch: number, state: ContextState, d: DecisionInput): Promise<void> {
    return Promise.resolve(
      this.recorder.events.emit(scope, 'decision', d.decision, {
        epoch,
        seq: state.decisions++,
        ...(d.reasonCode ? { reasonCode: d.reasonCode } : {}),
        details: {
          ...d.details,
          action: d.action,
          resourceType: d.resourceType,
          resourceId: d.resourceId,
          actorType: d.actorType,
          actorId: d.actorId,
        },
      }),
    );
  }
}

/**
 * One attempt's {@link ProcessorContext}. A class rather than an object literal: a literal with a
 * getter (`signal`, which makes the lease keeper's AbortController only when read) cannot be
 * cloned from V8's boilerplate and costs 1.2–2 µs to make; this costs about 60 ns. The fields and
 * methods are the object's own (so `const { tx, step } = ctx` works); `signal` is read through the
 * prototype (`ctx.signal` and destructuring work; a spread `{ ...ctx }` leaves it out).
 */
class AttemptContext<DB> implements ProcessorContext<DB> {
  readonly idempotencyKey: string;
  readonly key: ProcessorContext<DB>['key'];
  readonly epoch: number;
  readonly takeover: boolean;
  readonly attemptsMade: number;
  readonly attemptsStarted: number;
  readonly stalledCounter: number;
  readonly taskId: string | undefined;
  readonly job: ProcessorContext<DB>['job'];
  readonly token: string | undefined;
  readonly tx: ProcessorContext<DB>['tx'];
  readonly step: ProcessorContext<DB>['step'];
  readonly audit: ProcessorContext<DB>['audit'];
  readonly confirm: ProcessorContext<DB>['confirm'];
  readonly #keeper: LeaseKeeper;

  constructor(f: ProcessorContextFactory<DB>, input: ContextInput) {
    const { scope, keeper, state } = input;
    const epoch = input.claim.epoch;
    this.idempotencyKey = scope.k;
    this.key = scope.key;
    this.epoch = epoch;
    this.takeover = input.claim.transition === 'takeover';
    this.attemptsMade = scope.facts.attemptsMade;
    this.attemptsStarted = scope.facts.attemptsStarted;
    this.stalledCounter = scope.facts.stalledCounter;
    this.taskId = scope.taskId;
    this.job = scope.job;
    this.token = scope.token;
    this.#keeper = keeper;
    this.tx = (fn) => f.tx(input, fn);
    this.step = (name, fn) => f.steps.run(scope, input.fingerprint, name, keeper.signal, fn, state);
    this.audit = (d) => f.audit(scope, epoch, state, d);
    this.confirm = (request) => f.confirm(scope, epoch, request);
  }

  get signal(): AbortSignal {
    return this.#keeper.signal;
  }
}

/**
 * `ctx.step(name, fn)`: one ledger row per step, keyed from the operation's key, claimed and
 * decided exactly as the operation is ({@link decideClaim}) and recorded by the same
 * {@link OutcomeRecorder}. A resumed job replays finished steps; a step whose key another attempt
 * still holds makes the whole job wait as a delayed job, as an operation in progress does.
 */
export class StepRunner {
  constructor(private readonly recorder: OutcomeRecorder) {}

  async run<T>(
    parent: AttemptScope,
    fp: string,
    name: string,
    signal: AbortSignal,
    fn: (s: StepContext) => Promise<T>,
    state: ContextState,
  ): Promise<T> {
    const { s, events } = this.recorder;
    const key = parseIdempotencyKey({ ...parent.key, resourceKey: `${parent.key.resourceKey}#step=${name}` });
    const scope: AttemptScope = { ...parent, key, k: boundedKey(key), parentK: parent.k, stepId: name };
    const operation = `${s.op.name}#${name}`;
    const options = claimOptions(s, scope, operation, fingerprint(operation, fp));
    // Asked again while the operation's lease holds: nothing of this step has run yet.
    const { claim } = await this.recorder.persist('step claim', signal, () => claimKey(s, options));
    const decision = decideClaim(claim, scope, events);
    switch (decision.kind) {
      case 'run':
        return this.execute(scope, decision.claim, signal, fn);
      case 'replay':
        // Only a seal made for this step's row replays: a copied or plain value fails the job.
        try {
          return openResult<T>(decision.result, s.keyring, this.recorder.placeOf(scope));
        } catch (err) {
          throw isIdempotencyError(err) ? unrecoverable(err) : err;
        }
      case 'wait': {
        // The attempt that holds it (a crashed or stalled one of this job) has not let its lease
        // lapse: the attempt runner releases the operation and the job waits, delayed.
        const error = new IdempotencyInProgressError({ key: scope.k, retryAfterMs: decision.retryAfterMs });
        state.held = { scope, error, retryAfterMs: decision.retryAfterMs };
        throw error;
      }
      case 'refuse':
        throw decision.error;
    }
  }

  /** Runs the step's function under the step's own lease, then records its outcome. */
  private async execute<T>(
    scope: AttemptScope,
    claim: Acquired,
    outer: AbortSignal,
    fn: (s: StepContext) => Promise<T>,
  ): Promise<T> {
    const { s } = this.recorder;
    const epoch = claim.epoch;
    const keeper = new LeaseKeeper({
      ledger: s.options.ledger,
      key: scope.k,
      epoch,
      leaseMs: s.op.leaseMs,
      granted: claim,
      outer,
    });
    try {
      let value: T;
      try {
        value = await fn({ idempotencyKey: scope.k, key: scope.key, epoch, signal: keeper.signal });
      } catch (err) {
        // Record the step's own outcome (a step has no reconcile hook: ambiguous means
        // unknown), then hand the parent an error that it classifies the same way.
        const cls = classifyError(err, s.op.downstream);
        const stepClass = cls === 'reconcile' ? 'unknown' : cls;
        await this.recorder.recordError(scope, epoch, err, stepClass, keeper.signal);
        throw stepClass === 'unknown' && !(err instanceof UnknownOutcomeError)
          ? new UnknownOutcomeError({ key: scope.k, epoch })
          : err;
      }
      await this.recorder.complete(scope, epoch, value, keeper);
      return value; // the step's own value, exactly; the ledger holds it sealed
    } finally {
      keeper.stop();
    }
  }
}
