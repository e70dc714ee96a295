/**
 * Exit codes of the CLI and of the operations process it starts (`start`): distinct per kind of
 * failure, stable for scripts.
 */
export const EXIT = {
  ok: 0,
  /** Anything else (a bug, a database error, an audit write that failed...). */
  failure: 1,
  /** Bad arguments or usage (commander's own usage errors too). */
  usage: 2,
  /**
   * Missing or invalid configuration (DATABASE_URL, REDIS_URL, BQI_*), a database or role that does
   * not exist, credentials refused, or a schema not migrated: a restart does not heal it.
   */
  config: 3,
  /** Postgres or Redis unreachable (refused, timed out, a host name that does not resolve): a restart may heal it. */
  unreachable: 4,
  /** Unknown key, job, task. */
  notFound: 5,
  /** The ledger refused the transition (e.g. resolve of a key that is not `unknown`). */
  illegalTransition: 6,
  /** Interrupted by SIGINT (conventional 128 + 2). */
  interrupted: 130,
} as const;

export type ExitCode = (typeof EXIT)[keyof typeof EXIT];
