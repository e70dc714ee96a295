import { appendFileSync } from 'node:fs';

/** Set by `.ci/run`: a test the machine cannot run fails instead of being skipped. */
export const REQUIRE_ALL = 'BQI_REQUIRE_ALL';
/** Set by the global setup: where each skip's reason is written, for the list printed at the end. */
export const SKIPS_FILE = 'BQI_SKIPS_FILE';

/**
 * Whether this machine has what a test needs (a Debian package, a Postgres setting). On a stock
 * machine a test that lacks it is skipped with a one-line reason, and the run ends with the list of
 * them; under `.ci/run` (BQI_REQUIRE_ALL=1) nothing is skipped, so CI still runs every test, and
 * one whose need is missing fails there with the same reason.
 *
 * @example
 * const ready = machineHas('test/processes/poolers.test.ts', 'pgbouncer', existsSync(PGBOUNCER), 'apt-get install pgbouncer');
 * describe.runIf(ready)('…', () => { … });
 */
export function machineHas(file: string, what: string, present: boolean, remedy: string): boolean {
  if (present) return true;
  const reason = `${file}: needs ${what} (${remedy})`;
  if (process.env[REQUIRE_ALL] === '1') {
    // Not skipped: the file's own tests run and fail; say why first.
    process.stderr.write(`missing on this machine: ${reason}\n`);
    return true;
  }
  const log = process.env[SKIPS_FILE];
  if (log) appendFileSync(log, `${reason}\n`);
  return false;
}
