import type { Queue } from 'bullmq';
import type pg from 'pg';
import type { AuditStore } from '../audit/audit-store.js';
import type { PostgresLedger } from '../ledger/postgres-ledger.js';
import type { RedactionPolicy } from '../redaction/define-policy.js';
import type { Keyring } from '../sealing/keyring.js';
import type { Logger } from '../shared/logger.js';

/** An operation whose result schema and public fields the console uses when an operator resolves it. */
export type ConsoleOperation = {
  readonly name: string;
  readonly publicResult: readonly string[];
  parseResult(value: unknown): unknown;
};

/** What every page and action of the console reads and writes through: the library's own parts. */
export type ConsoleDeps = {
  pool: pg.Pool;
  schema: string;
  ledger: PostgresLedger;
  /** The audit store of the process's policy: operator events are written at once, timelines read. */
  store: AuditStore;
  policy: RedactionPolicy;
  /** Opens sealed values (for the operators of `decrypt`) and seals a resolved result. */
  keyring?: Keyring | undefined;
  /** Actors who may open sealed values, each opening audited. */
  decrypt: ReadonlySet<string>;
  /** The BullMQ queue of a name: an answer wakes its parked job, a re-run retries its job. */
  queue(name: string): Queue;
  /** Operations by name, for their result schemas. */
  operations: ReadonlyMap<string, ConsoleOperation>;
  logger?: Logger | undefined;
  /** Where the console is mounted, e.g. `/console`. */
  base: string;
};
