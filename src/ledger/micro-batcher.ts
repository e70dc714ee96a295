/**
 * Coalesces concurrent single-key requests into multi-row statements: per-statement parse,
 * plan, round trip and commit cost dominate one-row ledger statements, and a worker at
 * concurrency 50 has dozens of claims and completions in flight at once.
 *
 * A request waits at most until the next turn of the event loop, or until one of the
 * `maxInFlight` batches returns; meanwhile requests that arrive join the next batch, so
 * batches grow with load and latency stays at one round trip when idle. A batch never holds two
 * requests for one key (each key's outcome stays exact): a repeat waits for the next batch.
 */
export class MicroBatcher<T extends { key: string }, R> {
  private queue: { req: T; resolve: (r: R | undefined) => void; reject: (e: unknown) => void }[] = [];
  private inFlight = 0;
  private scheduled = false;

  constructor(
    private readonly exec: (reqs: T[]) => Promise<Map<string, R>>,
    private readonly maxBatch: number,
    private readonly maxInFlight: number,
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
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      this.flush();
    });
  }

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
          this.schedule();
        });
    }
  }
}
