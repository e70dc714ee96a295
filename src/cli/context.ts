import type { ConnectionOptions, Queue } from 'bullmq';
import type pg from 'pg';
import type { AuditStore } from '../audit/audit-store.js';
import type { CliConfig } from '../config/env.js';
import { ConfigError } from '../config/errors.js';
import { checkRedis, connectPostgres, openRedis, type RedisConnection } from '../config/services.js';
import type { PostgresLedger } from '../ledger/postgres-ledger.js';
import type { RedactionPolicy } from '../redaction/define-policy.js';
import type { Keyring } from '../sealing/keyring.js';

// Heavy modules (bullmq, pg, kysely, zod) are imported on use, so `--help` and usage errors
// answer at once and a Postgres-only command never loads BullMQ.

/** Where the CLI writes: stdout for results, stderr for diagnostics and progress. */
export type Output = {
  /** A line of output (a newline is added when missing). */
  out(text: string): void;
  /** Raw text to stdout (help). */
  outRaw(text: string): void;
  /** A line of diagnostics. */
  err(text: string): void;
  /** Raw text to stderr (progress redrawn in place). */
  errRaw(text: string): void;
  /** True when stderr is a terminal: the progress line is redrawn in place. */
  progressTTY: boolean;
};

const line = (text: string) => (text.endsWith('\n') ? text : `${text}\n`);

export const stdio: Output = {
  out: (text) => process.stdout.write(line(text)),
  outRaw: (text) => process.stdout.write(text),
  err: (text) => process.stderr.write(line(text)),
  errRaw: (text) => process.stderr.write(text),
  progressTTY: Boolean(process.stderr.isTTY),
};

const HINTS = {
  DATABASE_URL: 'is required (e.g. postgres://user:password@host:5432/db)',
  REDIS_URL: 'is required (e.g. redis://host:6379)',
} as const;

/**
 * The services one command uses, opened on first use and closed once at the end. Configuration
 * is checked before any connection (exit 3 before exit 4).
 */
export class CliContext {
  private poolP: Promise<pg.Pool> | undefined;
  private policyP: Promise<RedactionPolicy> | undefined;
  private redisP: Promise<RedisConnection> | undefined;
  private readonly queues: Queue[] = [];
  /** Audit stores made for commands, closed (their background statistics checks awaited) before the pool ends. */
  private readonly stores: AuditStore[] = [];

  constructor(
    readonly config: CliConfig,
    readonly io: Output = stdio,
  ) {}

  get schema(): string {
    return this.config.schema;
  }

  /** Fails with a configuration error (exit 3) unless every named variable is set. */
  require(...vars: (keyof typeof HINTS)[]): void {
    const missing = vars.filter((v) => !(v === 'DATABASE_URL' ? this.config.databaseUrl : this.config.redisUrl));
    if (missing.length > 0) throw new ConfigError(missing.map((v) => ({ variable: v, message: HINTS[v] })));
  }

  /**
   * The keyring of BQI_KEYRING (validated when the configuration was read); a configuration
   * error (exit 3) naming `usedBy` when it is unset.
   */
  keyring(usedBy: string): Keyring {
    if (!this.config.keyring) {
      throw new ConfigError([
        { variable: 'BQI_KEYRING', message: `is required by ${usedBy} (id:base64:…, the current key first)` },
      ]);
    }
    return this.config.keyring;
  }

  pool(): Promise<pg.Pool> {
    this.poolP ??= (async () => {
      this.require('DATABASE_URL');
      return connectPostgres(this.config.databaseUrl as string, {
        max: 3,
        applicationName: 'bullmq-idempotency-cli',
      });
    })();
    return this.poolP;
  }

  async ledger(): Promise<PostgresLedger> {
    const { PostgresLedger } = await import('../ledger/postgres-ledger.js');
    return new PostgresLedger({
      pool: await this.pool(),
      schema: this.schema,
      batching: false,
      preparedStatements: this.config.preparedStatements,
    });
  }

  /**
   * The trail's policy: the rules of `BQI_REDACTION` or the built-in ones, with the keyring's ref
   * keys, so what the CLI writes (operator events) and looks up matches the workers' refs.
   */
  auditPolicy(): Promise<RedactionPolicy> {
    this.policyP ??= import('../config/redaction-module.js').then((m) => m.configuredAuditPolicy(this.config));
    return this.policyP;
  }

  async store(): Promise<AuditStore> {
    const { AuditStore } = await import('../audit/audit-store.js');
    const store = new AuditStore(await this.pool(), this.schema, await this.auditPolicy(), {
      preparedStatements: this.config.preparedStatements,
    });
    this.stores.push(store);
    return store;
  }

  /**
   * BullMQ's connection, after a reachability check of REDIS_URL: options for a single node, or
   * one ioredis `Cluster` (closed with the context) when REDIS_URL names cluster nodes.
   */
  async redis(): Promise<ConnectionOptions> {
    this.redisP ??= (async () => {
      this.require('REDIS_URL');
      const url = this.config.redisUrl as string;
      await checkRedis(url);
      return openRedis(url, this.config.prefix);
    })();
    return (await this.redisP).connection;
  }

  /** A queue under the configured prefix, closed with the context. */
  async queue(name: string): Promise<Queue> {
    const connection = await this.redis();
    const { openQueue } = await import('../shared/queue-backend.js');
    const q = openQueue(name, { connection, prefix: this.config.prefix });
    q.on('error', () => {}); // surfaced by the failing call itself
    this.queues.push(q);
    return q;
  }

  async close(): Promise<void> {
    await Promise.allSettled(this.queues.map((q) => q.close()));
    const redis = await this.redisP?.catch(() => undefined);
    await redis?.close().catch(() => {});
    await Promise.allSettled(this.stores.map((s) => s.close()));
    const pool = await this.poolP?.catch(() => undefined);
    await pool?.end().catch(() => {});
  }
}
