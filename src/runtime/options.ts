import type { ConnectionOptions } from 'bullmq';
import type pg from 'pg';
import type { IdempotencyObserver } from '../observability/observer.js';
import type { RedactionPolicy } from '../redaction/define-policy.js';
import type { RedactionPolicyInput } from '../redaction/policy-schema.js';
import type { ValueScanner } from '../scanners/index.js';
import type { Keyring } from '../sealing/keyring.js';
import type { Logger } from '../shared/logger.js';

/** BullMQ's own default key prefix, which the runtime keeps unless told otherwise. */
export const DEFAULT_PREFIX = 'bull';

/**
 * The audit trail of a runtime. Its redaction policy is keyed from the runtime's keyring, so the
 * references the workers, the writer and the operator actions make are the same ones and a
 * `timeline(taskId)` finds its events whatever id was turned into a reference.
 */
export type IdempotencyAuditOptions = {
  /** The BullMQ queue the emitter sends batches to and the writer consumes. @defaultValue `'bullmq-idempotency-audit'` */
  queue?: string;
  /**
   * Runs the audit writer (batches → Postgres) in this process, as a single-process application
   * and the examples want. Off, the operations process (`bullmq-idempotency start`) writes them.
   * @defaultValue `false`
   */
  writer?: boolean;
  /** Batches the in-process writer inserts at once. @defaultValue 4 */
  writerConcurrency?: number;
  /**
   * The redaction policy of the trail: its input without `hmacKeys` (the runtime adds the
   * keyring's ref keys), e.g. `{ version: '2026-11', details: { 'tool.send_email': ['template'] } }`,
   * or a compiled policy, which must be keyed from the same keyring (`hmacKeys: keyring.refKeys()`):
   * one keyed otherwise is refused (`IDEMPOTENCY_CONFIG`, option `audit.redaction`).
   * @defaultValue the built-in rules keyed from the keyring (as the CLI and the operations process key theirs)
   */
  redaction?: RedactionPolicy | Omit<RedactionPolicyInput, 'hmacKeys'>;
  /** Events per audit job. @defaultValue 500 */
  maxBatch?: number;
  /** Longest time an event waits in the emitter's buffer. @defaultValue 50 ms */
  maxDelayMs?: number;
};

/**
 * Durable intents (docs/intents.md): the intent recorded in Postgres when it is accepted, and a
 * relay that moves recorded intents to BullMQ and adds again any whose job vanished before a claim.
 */
export type IdempotencyIntentOptions = {
  /**
   * Every `idem.enqueue` records its intent, as `{ durable: true }` does for one call.
   * @defaultValue `false`
   */
  durable?: boolean;
  /**
   * Runs a relay in this process (a single-process application): it listens for intents
   * committed in transactions (`LISTEN`, one connection of the pool held) and polls every
   * `everyMs`. Off, the operations process (`bullmq-idempotency start`) relays.
   * @defaultValue `false`
   */
  relay?: boolean | IdempotencyRelayOptions;
};

/** The in-process relay of {@link IdempotencyIntentOptions.relay}. */
export type IdempotencyRelayOptions = {
  /** Polling interval, the fallback to notifications. @defaultValue 5 000 */
  everyMs?: number;
  /** Listen for commits (`LISTEN`); off behind a pooler in transaction mode. @defaultValue `true` */
  listen?: boolean;
  /** Intents looked at per transaction. @defaultValue 200 */
  batchSize?: number;
  /** How long an intent whose job is in Redis waits before it is looked at again. @defaultValue 30 000 */
  recheckAfterMs?: number;
};

/**
 * Everything {@link createIdempotency} needs, in one place: where the ledger and the trail live
 * (Postgres and schema), where the queues live (Redis and prefix), and the keyring. Every part of
 * the runtime shares them; moving a program to another schema or prefix changes only this object.
 */
export type IdempotencyOptions = {
  /**
   * The Postgres of the ledger and the audit trail: a connection string (the runtime opens a
   * pool and ends it on `close()`) or a `pg.Pool` of yours (never ended by the runtime).
   */
  postgres: string | pg.Pool;
  /** Postgres schema of the library's tables; a plain identifier. @defaultValue `'public'` */
  schema?: string;
  /** Pool size when the runtime opens its own pool. @defaultValue 10 */
  poolSize?: number;
  /** Named prepared statements; `false` behind a pooler in transaction mode. @defaultValue `true` */
  preparedStatements?: boolean;
  /**
   * The queues' Redis: a URL (`redis://host:6379`, `rediss://…`, or a Redis Cluster's nodes
   * `redis+cluster://host:7000,host:7001`), or BullMQ's `ConnectionOptions` (options, or an
   * ioredis `Redis`/`Cluster` of yours, never closed by the runtime).
   */
  redis: string | ConnectionOptions;
  /**
   * BullMQ key prefix of every queue the runtime opens. On Redis Cluster it must hold a hash tag
   * (`{bull}`): BullMQ's scripts touch several keys of a queue at once.
   * @defaultValue `'bull'`
   */
  prefix?: string;
  /**
   * Seals results, step results, error text and declared input; keys fingerprints and the audit
   * trail's references. A `Keyring` (`defineKeyring`, `loadKeyring`) or a spec string as
   * `BQI_KEYRING` takes it: `k2:base64:…,k1:base64:…`, the current key first.
   */
  keyring: Keyring | string;
  /** The audit trail; `false` sends no events (the ledger still records every transition). @defaultValue on, emitter only */
  audit?: IdempotencyAuditOptions | false;
  /** Metrics and spans of the workers: `createIdempotencyMetrics()`, `createIdempotencyTracing()`, or both combined. */
  observer?: IdempotencyObserver;
  /**
   * Where the runtime, its workers and the wrapper log (a pino logger fits). `false`: nothing.
   * @defaultValue outside `NODE_ENV=production`, warnings and errors to stderr, one line each; in production, nothing
   */
  logger?: Logger | false;
  /**
   * The line logged for each failed attempt also tells the original error's message, causes and
   * first stack frame, through the scanners (they are a second line: words that are data, such
   * as a street address, pass them). What BullMQ and Postgres keep is sealed either way.
   * @defaultValue `true` with the default development logger (so a developer sees `fetch failed …
   * ENOTFOUND` in the terminal on the first failed attempt), `false` with a logger of yours or in production
   */
  logErrorText?: boolean;
  /**
   * Scans text with this in place of the built-in value scanners (`bullmq-idempotency/scanners`):
   * the audit trail's policy runs it on every string it keeps (a policy's own scanners still run
   * first), and every line the runtime logs passes through it before `logger` sees it.
   * @defaultValue the built-in scanners, and log lines as the library writes them
   */
  valueScanner?: ValueScanner;
  /** Identifies this process in lease records and system audit events. @defaultValue `hostname:pid` */
  owner?: string;
  /** Durable intents: recorded in Postgres at `enqueue`, relayed to BullMQ. @defaultValue off */
  intents?: IdempotencyIntentOptions;
};
