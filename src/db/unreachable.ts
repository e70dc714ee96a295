/**
 * "The database could not be asked": the connection was refused, reset or cut, it timed out, the
 * server is shutting down, starting up or full. Distinct from what the database answered (a
 * constraint, a stale epoch, a bad value) and from the library's own refusals: only these
 * errors say nothing about the ledger's state, so asking again later is always safe.
 */

/** Node socket and DNS errors of a connection that could not be made or was lost. */
const SOCKET_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENETDOWN',
  'EAI_AGAIN',
  'ENOTCONN',
]);

/**
 * SQLSTATEs of a server that cannot serve: class 08 (connection exception) is matched by prefix;
 * 57P01 admin shutdown, 57P02 crash shutdown, 57P03 cannot connect now (starting, recovering),
 * 57014 a statement timeout, 53300 too many connections, 25006 a read-only server (a failover
 * to a standby that has not been promoted yet).
 */
const SQLSTATES = new Set(['57P01', '57P02', '57P03', '57014', '53300', '25006']);

/** Messages of node-postgres and pg-pool for a connection lost or never made (they carry no code). */
const MESSAGES = [
  /connection terminated/i,
  /timeout exceeded when trying to connect/i,
  /connection timeout/i,
  /query read timeout/i,
  /not queryable/i,
  /connection (?:was )?closed/i,
  /server closed the connection unexpectedly/i,
];

/** True when `err` (or an error it wraps) says the database could not be asked. */
export function isInfraError(err: unknown): boolean {
  const seen = new Set<unknown>();
  const queue: unknown[] = [err];
  while (queue.length > 0 && seen.size < 10) {
    const e = queue.shift();
    if (!(e instanceof Error) || seen.has(e)) continue;
    seen.add(e);
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string') {
      if (SOCKET_CODES.has(code) || SQLSTATES.has(code) || /^08[0-9A-Z]{3}$/.test(code)) return true;
    }
    if (MESSAGES.some((m) => m.test(e.message))) return true;
    // A connect to several addresses fails with an AggregateError of each attempt's error.
    if (e instanceof AggregateError) queue.push(...e.errors);
    if (e.cause !== undefined) queue.push(e.cause);
  }
  return false;
}
