import { IdempotencyInProgressError, UnknownOutcomeError } from '../errors/errors.js';
import { isIdempotencyError } from '../errors/idempotency-error.js';
import { fingerprint } from '../fingerprint/fingerprint.js';
import { boundedKey, parseIdempotencyKey } from '../keys/idempotency-key.js';
import { unrecoverable } from '../sealing/bullmq-signals.js';
import { openResult } from '../sealing/sealed-result.js';
import type { AttemptScope } from './attempt-scope.js';
import { type Acquired, decideClaim } from './claim-decision.js';
import { claimKey, claimOptions } from './claim-key.js';
import { classifyError } from './classify.js';
import type { ContextState } from './context-state.js';
import { LeaseKeeper } from './lease-keeper.js';
import type { OutcomeRecorder } from './outcome-recorder.js';
import type { StepContext } from './types.js';

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
