import {
  type BackendFactory,
  type ConnectionOptions,
  createPostgresBackend,
  type Processor,
  Queue,
  QueueEvents,
  type QueueEventsOptions,
  type QueueOptions,
  Worker,
  type WorkerOptions,
} from 'bullmq';
import { IdempotencyConfigError } from '../errors/errors.js';

/**
 * Where BullMQ keeps the queues: Redis (BullMQ's default backend) or PostgreSQL (BullMQ's own
 * PostgreSQL backend, `createPostgresBackend`). A queue URL of scheme `postgres:` or
 * `postgresql:` selects the latter; its connection is remembered here with its backend, so every
 * part that opens a queue, a worker or a `QueueEvents` on that connection opens it on the same
 * backend without being told twice.
 */
export type QueueBackendKind = 'redis' | 'postgres';

const BACKENDS = new WeakMap<object, BackendFactory>();

const POSTGRES_SCHEME = /^postgres(?:ql)?:\/\//i;

/** Whether a queue URL names BullMQ's PostgreSQL backend (`postgres://…`, `postgresql://…`). */
export function isPostgresQueueUrl(url: string): boolean {
  return POSTGRES_SCHEME.test(url.trim());
}

/** A plain identifier, as the schema of BullMQ's tables must be. */
const IDENT = /^[a-z_][a-z0-9_]{0,62}$/;

/**
 * The Postgres schema of BullMQ's own tables for a prefix: the prefix without the braces of a
 * Redis Cluster hash tag (`{payments}` → `payments`), which must then be a plain lower-case
 * identifier. On this backend the prefix names the schema, so one prefix keeps one
 * deployment's queues apart from another's, as it does on Redis.
 */
export function queueSchemaOf(prefix: string): string {
  const schema = prefix.replace(/^\{(.*)\}$/, '$1');
  if (!IDENT.test(schema)) {
    throw new IdempotencyConfigError(
      `prefix ${JSON.stringify(prefix)} must be a lower-case SQL identifier (${IDENT}) on BullMQ's PostgreSQL ` +
        "backend: it names the schema of BullMQ's tables",
      { option: 'prefix', prefix },
    );
  }
  return schema;
}

/**
 * The connection every queue, worker and `QueueEvents` is given for BullMQ's PostgreSQL backend at
 * `url`, its tables in the schema of `prefix` (created, with BullMQ's migrations, on first use).
 *
 * @example
 * const connection = postgresQueueConnection('postgres://postgres@127.0.0.1:5432/app', 'bull');
 * const queue = openQueue('charges', { connection, prefix: 'bull' });
 */
export function postgresQueueConnection(
  url: string,
  prefix: string,
  options: { max?: number } = {},
): ConnectionOptions {
  const connection = {
    connectionString: url,
    schema: queueSchemaOf(prefix),
    migrate: true,
    ...(options.max === undefined ? {} : { max: options.max }),
  };
  BACKENDS.set(connection, createPostgresBackend as unknown as BackendFactory);
  return connection as unknown as ConnectionOptions;
}

/** The backend factory of a connection made by {@link postgresQueueConnection}; undefined for Redis. */
export function queueBackendOf(connection: unknown): BackendFactory | undefined {
  return typeof connection === 'object' && connection !== null ? BACKENDS.get(connection) : undefined;
}

/** Which backend a connection is on. */
export function queueBackendKind(connection: unknown): QueueBackendKind {
  return queueBackendOf(connection) ? 'postgres' : 'redis';
}

/** A BullMQ `Queue` on the backend of its connection. */
export function openQueue<D = unknown, R = unknown>(name: string, opts: QueueOptions): Queue<D, R> {
  const backend = queueBackendOf(opts.connection);
  return (backend ? new Queue(name, opts as never, backend as never) : new Queue(name, opts)) as Queue<D, R>;
}

/** A BullMQ `Worker` on the backend of its connection. */
export function openWorker<D = unknown, R = unknown>(
  name: string,
  processor: string | URL | null | Processor<D, R>,
  opts: WorkerOptions,
): Worker<D, R> {
  const backend = queueBackendOf(opts.connection);
  return (
    backend ? new Worker(name, processor as never, opts as never, backend as never) : new Worker(name, processor, opts)
  ) as Worker<D, R>;
}

/** A BullMQ `QueueEvents` on the backend of its connection. */
export function openQueueEvents(name: string, opts: QueueEventsOptions): QueueEvents {
  const backend = queueBackendOf(opts.connection);
  return (
    backend ? new QueueEvents(name, opts as never, backend as never) : new QueueEvents(name, opts)
  ) as QueueEvents;
}
