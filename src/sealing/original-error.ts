/**
 * The processor's own error behind each error the library hands to BullMQ, for this process only.
 * BullMQ stores what it is handed (`failedReason`, `stacktrace`, the events stream) and passes it
 * to `failed` listeners, whose loggers serialise it: so what it is handed carries only a code, a
 * class name and a public message, and the original stays here. A WeakMap, never a property: no
 * `JSON.stringify`, `util.inspect`, BullMQ or pino's err serializer (which follows `cause`) can
 * reach it, and it goes when the error BullMQ got goes.
 */
const ORIGINALS = new WeakMap<object, { thrown: unknown }>();

/** Remembers `thrown` as what `handed` stands for (the innermost original when `thrown` stands for one itself). */
export function rememberOriginal(handed: object, thrown: unknown): void {
  const inner = typeof thrown === 'object' && thrown !== null ? ORIGINALS.get(thrown) : undefined;
  ORIGINALS.set(handed, inner ?? { thrown });
}

/** True when `err` is an error the library made to stand for another one. */
export function hasOriginal(err: unknown): boolean {
  return typeof err === 'object' && err !== null && ORIGINALS.has(err);
}

/**
 * The error the processor (or the library, for its own refusals) threw, for an error the wrapper
 * handed to BullMQ — the one a `failed` listener receives, `job.failedReason` and `job.stacktrace`
 * are made of — when the attempt ran in this process; `undefined` for any other value. What was
 * thrown is returned as it was: an Error with its message, stack, `cause` and properties, or a
 * string, an object, `null`. In a sandboxed processor (another process) there is nothing to
 * return: its log line tells the cause, and `inspect --decrypt` opens the stored copy.
 *
 * @example
 * worker.on('failed', (job, err) => {
 *   console.error(originalError(err) ?? err); // fetch failed … [cause]: getaddrinfo ENOTFOUND api.example
 * });
 */
export function originalError(err: unknown): unknown {
  return typeof err === 'object' && err !== null ? ORIGINALS.get(err)?.thrown : undefined;
}
