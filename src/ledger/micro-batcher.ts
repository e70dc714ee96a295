/** How long a batch may be in flight, no batch returning, before the next one starts beside it. */
export const DEFAULT_OVERLAP_AFTER_MS = 50;

/**
 * Coalesces concurrent single-key requests into multi-row statements: per-statement parse,
 * plan, round trip and commit cost dominate one-row ledger statements, and a worker at
 * concurrency 50 has dozens of claims and completions in flight at once.
 *
 * With no batch in flight, a request waits at most until the next turn of the event loop. While
 * one is in flight, requests that arrive wait for it to return and go together in the next one:
 * batches grow with load, and a loaded server runs one statement where it would run several
 * small ones (on BullMQ's PostgreSQL backend, whose own statements share the server, the ledger
 * ran 0.18 statements per fresh job instead of 0.36 with four small batches in flight, in one
 * sitting on a heavily loaded machine). Only a batch in flight for
 * `overlapAfterMs` without any batch returning (a statement waiting on a lock, a slow server)
 * lets the next one start beside it, up to `maxInFlight`, so one slow statement does not hold up
 * every key behind it. A batch never holds two requests for one key (each key's outcome stays
 * exact): a repeat waits for the next batch.
 */
export class MicroBatcher<T extends { key: string }, R> {
  private queue: { req: T; resolve: (r: R | undefined) => void; reject: (e: unknown) => void }[] = [];
  private inFlight = 0;
  private scheduled = false;
  /** Batches started or returned so far: the overlap timer tells by it whether any moved meanwhile. */
  private progress = 0;
  private overlapTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly exec: (reqs: T[]) => Promise<Map<string, R>>,
    private readonly maxBatch: number,
    private readonly maxInFlight: number,
    private readonly overlapAfterMs = DEFAULT_OVERLAP_AFTER_MS,
  ) {}

  /** Resolves with the batch's answer for this request's key (undefined when it had none). */
  submit(req: T): Promise<R | undefined> {
    return new Promise((resolve, reject) => {
      this.queue.push({ req, resolve, reject });
      this.schedule();
    });
  }

  private schedule(): void {
    if (this.scheduled || this.queue.length === 0 || this.inFlight >= this.maxInFlight) return;
    if (this.inFlight > 0) {
      this.armOverlap();
      return;
    }
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      this.flush();
    });
  }

  /** Starts the next batch beside those in flight if none of them moves within `overlapAfterMs`. */
  private armOverlap(): void {
    if (this.overlapTimer) return;
    const seen = this.progress;
    this.overlapTimer = setTimeout(() => {
      this.overlapTimer = undefined;
      if (this.progress === seen) this.flush();
      else this.schedule();
    }, this.overlapAfterMs);
    // A batch in flight keeps the process alive; its return schedules what waits.
    this.overlapTimer.unref();
  }

  /**
   * Starts batches for every request waiting now: more than one only when a batch is full or a key
   * repeats (a repeat goes in the next batch, at once, as many concurrent jobs of one key need).
   */
  private flush(): void {
    while (this.queue.length > 0 && this.inFlight < this.maxInFlight) {
      const seen = new Set<string>();
      const batch: typeof this.queue = [];
      const rest: typeof this.queue = [];
      for (const item of this.queue) {
        if (batch.length < this.maxBatch && !seen.has(item.req.key)) {
          seen.add(item.req.key);
          batch.push(item);
        } else {
          rest.push(item);
        }
      }
      this.queue = rest;
      this.inFlight++;
      this.progress++;
      this.exec(batch.map((b) => b.req))
        .then(
          (answers) => {
            for (const b of batch) b.resolve(answers.get(b.req.key));
          },
          (err) => {
            for (const b of batch) b.reject(err);
          },
        )
        .finally(() => {
          this.inFlight--;
          this.progress++;
          this.schedule();
        });
    }
  }
}
