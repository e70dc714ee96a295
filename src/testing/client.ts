/** The client side of the commit-counting server (commit-counter.ts): one `POST /effects`. */

export interface PostEffectResult<T = unknown> {
  status: number;
  body: T;
  /** True when the server replayed a stored response (`Idempotent-Replayed: true`). */
  replayed: boolean;
}

/** A network failure talking to the server: the response (if any) was lost. `code` e.g. UND_ERR_SOCKET, ECONNRESET. */
export class EffectRequestError extends Error {
  readonly code: string | undefined;
  constructor(message: string, code: string | undefined, cause: unknown) {
    super(message, { cause });
    this.name = 'EffectRequestError';
    this.code = code;
  }
}

/**
 * `POST <url>/effects` (`url` may be the base URL or already end in /effects) with a JSON body.
 * Returns any HTTP status (no throw on 4xx/5xx); throws EffectRequestError on network errors.
 */
export async function postEffect<T = unknown>(
  url: string,
  body: unknown,
  idempotencyKey?: string,
  signal?: AbortSignal,
): Promise<PostEffectResult<T>> {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (idempotencyKey !== undefined) headers['idempotency-key'] = idempotencyKey;
  try {
    const res = await fetch(new URL('/effects', url), {
      method: 'POST',
      headers,
      body: JSON.stringify(body),
      signal: signal ?? null,
    });
    const text = await res.text();
    return {
      status: res.status,
      body: (text === '' ? undefined : JSON.parse(text)) as T,
      replayed: res.headers.get('idempotent-replayed') === 'true',
    };
  } catch (err) {
    if (signal?.aborted) throw err;
    const code = errorCode(err);
    const reason = err instanceof Error && err.cause instanceof Error ? err.cause.message : String(err);
    throw new EffectRequestError(`POST /effects failed: ${reason}${code ? ` (${code})` : ''}`, code, err);
  }
}

function errorCode(err: unknown): string | undefined {
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 5; e = e.cause, depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string') return code;
  }
  return undefined;
}
