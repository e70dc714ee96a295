/**
 * Whether an error of the audit writer is transient: the database could not be reached or
 * refused the session for now (unreachable, connection terminated, too many connections, shutting
 * down or starting up, a serialisation failure). Such a batch is retried without limit; anything
 * else keeps BullMQ's attempts and, for data Postgres refuses, the dead-letter path.
 *
 * Judged by SQLSTATE, by Node's socket error codes, then by the fixed texts of node-postgres'
 * own connection errors (they carry no code); nested errors (`cause`, an AggregateError of a
 * dual-stack connect) are looked into.
 *
 * @example
 * isTransientError(Object.assign(new Error('sorry, too many clients already'), { code: '53300' })); // true
 */
export function isTransientError(err: unknown, depth = 0): boolean {
  if (depth > 4 || err === null || typeof err !== 'object') return false;
  const code = (err as { code?: unknown }).code;
  if (typeof code === 'string') {
    if (TRANSIENT_SQLSTATE_CLASSES.has(code.slice(0, 2)) || TRANSIENT_SQLSTATES.has(code)) return true;
    if (TRANSIENT_SOCKET_CODES.has(code)) return true;
  }
  const message = (err as { message?: unknown }).message;
  if (typeof message === 'string' && isTransientMessage(message)) return true;
  if (err instanceof AggregateError && err.errors.some((e) => isTransientError(e, depth + 1))) return true;
  return isTransientError((err as { cause?: unknown }).cause, depth + 1);
}

/**
 * The same judgement on an error's text alone: what BullMQ keeps of a failed job
 * (`failedReason`), for batches that failed before the writer retried transient errors.
 */
export function isTransientMessage(message: string): boolean {
  return TRANSIENT_TEXTS.some((re) => re.test(message));
}

/** 08 connection exception, 53 insufficient resources (too many connections, out of memory). */
const TRANSIENT_SQLSTATE_CLASSES = new Set(['08', '53']);

const TRANSIENT_SQLSTATES = new Set([
  '57P01', // admin_shutdown
  '57P02', // crash_shutdown
  '57P03', // cannot_connect_now (starting up, shutting down, in recovery)
  '40001', // serialization_failure
  '40P01', // deadlock_detected
  '55P03', // lock_not_available
]);

const TRANSIENT_SOCKET_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'ETIMEDOUT',
  'EPIPE',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENETDOWN',
  'EAI_AGAIN',
  'ENOTFOUND',
]);

const TRANSIENT_TEXTS = [
  /\bECONNREFUSED\b|\bECONNRESET\b|\bETIMEDOUT\b|\bEPIPE\b|\bEHOSTUNREACH\b|\bENETUNREACH\b|\bEAI_AGAIN\b/,
  /^Connection terminated/i, // node-postgres: unexpectedly, due to connection timeout
  /timeout exceeded when trying to connect/i, // pg-pool's connectionTimeoutMillis
  /Client has encountered a connection error and is not queryable/i,
  /Connection (?:is )?closed/i,
  /too many clients already|remaining connection slots are reserved/i,
  /the database system is (?:starting up|shutting down|in recovery mode|not yet accepting connections)/i,
  /terminating connection due to administrator command/i,
];
