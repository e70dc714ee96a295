import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import pg from 'pg';
import { inject } from 'vitest';
import { migrate } from '../../migrations/migrate.js';
import { type LedgerOptions, PostgresLedger } from '../../src/ledger/postgres-ledger.js';

type Closable = { what: string; closed: () => boolean; close: () => Promise<unknown> };

/**
 * Per-file isolation: a fresh Postgres schema and BullMQ prefix, and a register of every
 * connection the file opens. `teardown()` fails when the test left one open (after closing it),
 * and checks pg_stat_activity for connections still tagged with this file's name.
 */
export class TestContext {
  readonly schema: string;
  readonly prefix: string;
  readonly databaseUrl: string;
  readonly redisUrl: string;
  readonly tag: string;
  private readonly resources: Closable[] = [];
  private admin: pg.Pool | undefined;

  constructor(name: string) {
    const id = randomBytes(4).toString('hex');
    this.tag = `t_${name.replace(/[^a-z0-9]/gi, '_').toLowerCase()}_${id}`.slice(0, 60);
    this.schema = this.tag;
    this.prefix = `{${this.tag}}`;
    this.databaseUrl = withAppName(inject('databaseUrl'), this.tag);
    this.redisUrl = inject('redisUrl');
  }

  /** Creates the schema and runs the library's migrations into it. */
  async setup(): Promise<this> {
    await migrate({ connectionString: this.databaseUrl, schema: this.schema });
    return this;
  }

  /** A pg pool tagged with this file's name; must be ended by the test. */
  pool(max = 10): pg.Pool {
    const pool = new pg.Pool({ connectionString: this.databaseUrl, max });
    let ended = false;
    const end = pool.end.bind(pool);
    pool.end = (async () => {
      ended = true;
      return end();
    }) as typeof pool.end;
    this.track(
      'pg pool',
      () => ended,
      () => pool.end(),
    );
    return pool;
  }

  /** A ledger on its own pool in this file's schema; must be closed by the test. */
  ledger(options: Partial<LedgerOptions> = {}): PostgresLedger {
    const ledger = new PostgresLedger({ connectionString: this.databaseUrl, schema: this.schema, ...options });
    let closed = false;
    const close = ledger.close.bind(ledger);
    ledger.close = async () => {
      closed = true;
      return close();
    };
    this.track(
      'ledger',
      () => closed,
      () => ledger.close(),
    );
    return ledger;
  }

  /** A Redis connection suitable for BullMQ; must be closed by the test. */
  redis(): Redis {
    const r = new Redis(this.redisUrl, { maxRetriesPerRequest: null });
    this.track(
      'redis connection',
      () => r.status === 'end',
      () => r.quit().catch(() => r.disconnect()),
    );
    return r;
  }

  /** Registers anything with a close (workers, queues) for the leak check. */
  track(what: string, closed: () => boolean, close: () => Promise<unknown>): void {
    this.resources.push({ what, closed, close });
  }

  /** Runs a query on an admin pool of this file (not counted as a leak). */
  async query<T extends pg.QueryResultRow = pg.QueryResultRow>(
    text: string,
    values: unknown[] = [],
  ): Promise<pg.QueryResult<T>> {
    this.admin ??= new pg.Pool({ connectionString: withAppName(inject('databaseUrl'), `${this.tag}_admin`), max: 2 });
    return this.admin.query<T>(text, values);
  }

  async teardown(): Promise<void> {
    const leaked = this.resources.filter((r) => !r.closed());
    for (const r of leaked) await r.close().catch(() => {});
    // pool.end() resolves before the server has dropped the backends: allow a moment, then judge.
    let open = 0;
    const deadline = Date.now() + 5_000;
    do {
      const rows = await this.query<{ n: string }>(
        'select count(*) as n from pg_stat_activity where application_name = $1',
        [this.tag],
      );
      open = Number(rows.rows[0]?.n ?? 0);
      if (open > 0) await new Promise((r) => setTimeout(r, 50));
    } while (open > 0 && Date.now() < deadline);
    await this.query(`drop schema if exists ${this.schema} cascade`);
    await this.admin?.end();
    const redis = new Redis(this.redisUrl);
    try {
      let cursor = '0';
      do {
        const [next, keys] = await redis.scan(cursor, 'MATCH', `${this.prefix}*`, 'COUNT', 1000);
        cursor = next;
        if (keys.length) await redis.del(...keys);
      } while (cursor !== '0');
    } finally {
      await redis.quit();
    }
    if (leaked.length > 0) {
      throw new Error(`Test left open: ${leaked.map((r) => r.what).join(', ')}`);
    }
    if (open > 0) throw new Error(`${open} Postgres connection(s) of ${this.tag} were still open`);
  }
}

function withAppName(url: string, name: string): string {
  const u = new URL(url);
  u.searchParams.set('application_name', name);
  return u.toString();
}

/** Polls `check` until it returns a truthy value or the deadline passes. */
export async function waitFor<T>(
  check: () => Promise<T> | T,
  what: string,
  timeoutMs = 30_000,
  everyMs = 25,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`Timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
