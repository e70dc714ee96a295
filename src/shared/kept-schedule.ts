import type { Queue } from 'bullmq';
import { errorLabel } from '../errors/clean-name.js';
import { ERROR_CODES } from '../errors/idempotency-error.js';
import type { Logger } from '../shared/logger.js';

/** A periodic job of the operations process, kept by a BullMQ job scheduler. */
export type KeptScheduleSpec = {
  /** The job scheduler's id. */
  id: string;
  /** The name of each job it makes. */
  jobName: string;
  everyMs: number;
};

/** Creates or updates the job scheduler of `spec` (upserted: safe on every start). */
export async function upsertKeptSchedule(queue: Queue, spec: KeptScheduleSpec): Promise<void> {
  await queue.upsertJobScheduler(
    spec.id,
    { every: spec.everyMs },
    { name: spec.jobName, opts: { removeOnComplete: 100, removeOnFail: 100 } },
  );
}

/** What the last check of a {@link KeptSchedule} found: `missing` until it is re-created. */
export type KeptScheduleState = 'scheduled' | 'missing' | 'unchecked';

/**
 * Keeps a job scheduler in place. It lives only in Redis, so a Redis that loses its data loses
 * it; every `everyMs` it is looked up (one Redis read) and re-created when missing (logged
 * `IDEMPOTENCY_SCHEDULE_MISSING`). `state` (shown by `/readyz`) and `recreated` say what the
 * checks found; a check that cannot reach Redis leaves `state` as it was.
 *
 * @example
 * const schedule = new KeptSchedule(relayQueue, { id: 'intent-relay', jobName: 'relay', everyMs: 5_000 }, logger);
 * await schedule.start();
 * // …
 * schedule.stop();
 */
export class KeptSchedule {
  state: KeptScheduleState = 'unchecked';
  /** Times a check found the schedule missing and re-created it. */
  recreated = 0;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  private checking: Promise<KeptScheduleState> | undefined;

  constructor(
    private readonly queue: Queue,
    private readonly spec: KeptScheduleSpec,
    private readonly logger?: Logger,
  ) {}

  /** Whether the schedule exists in Redis now. */
  async exists(): Promise<boolean> {
    return (await this.queue.getJobScheduler(this.spec.id)) !== undefined;
  }

  /** Creates the schedule and starts the periodic check. */
  async start(): Promise<void> {
    await upsertKeptSchedule(this.queue, this.spec);
    this.state = 'scheduled';
    this.arm();
  }

  /** Looks the schedule up, re-creating it when missing; one check at a time. */
  check(): Promise<KeptScheduleState> {
    this.checking ??= this.checkOnce().finally(() => {
      this.checking = undefined;
    });
    return this.checking;
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
  }

  private async checkOnce(): Promise<KeptScheduleState> {
    if (await this.exists()) {
      this.state = 'scheduled';
      return this.state;
    }
    this.state = 'missing';
    if (this.stopped) return this.state;
    this.logger?.warn(
      { code: ERROR_CODES.scheduleMissing, scheduler: this.spec.id, queue: this.queue.name },
      'a schedule is missing from Redis (its data was lost?): re-creating it',
    );
    await upsertKeptSchedule(this.queue, this.spec);
    this.recreated++;
    this.state = 'scheduled';
    return this.state;
  }

  private arm(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.check()
        .catch((err: unknown) =>
          this.logger?.warn({ err: errorLabel(err), scheduler: this.spec.id }, 'a schedule could not be checked'),
        )
        .finally(() => this.arm());
    }, this.spec.everyMs);
    this.timer.unref();
  }
}
