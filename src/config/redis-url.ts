/**
 * `REDIS_URL`, read: one Redis (`redis://host:6379`, `rediss://…`, passed on as it is), or the
 * seed nodes of a Redis Cluster: `redis+cluster://host:7000,host:7001,host:7002` (`rediss+cluster`
 * for TLS), or a comma-separated list of node URLs (`redis://host:7000,redis://host:7001`). The
 * client learns the other nodes from any one seed. Credentials may be given on the first node.
 * A `postgres://` (or `postgresql://`) URL puts the queues on BullMQ's own PostgreSQL backend
 * instead: no Redis at all (docs/postgres-only.md).
 * Free of heavy imports: the CLI reads its configuration before loading ioredis.
 */

import { ERROR_CODES, IdempotencyError } from '../errors/idempotency-error.js';

export type RedisNode = { host: string; port: number };

/** Where the queues are: a single Redis or the nodes of a cluster. */
export type RedisTarget =
  | { kind: 'single'; url: string }
  /** BullMQ's PostgreSQL backend (`postgres://…`): the queues in Postgres, no Redis at all. */
  | { kind: 'postgres'; url: string }
  | { kind: 'cluster'; nodes: RedisNode[]; tls: boolean; username?: string; password?: string };

/** `REDIS_URL` is none of the accepted forms; the message says which part and why. */
export class RedisUrlError extends IdempotencyError<typeof ERROR_CODES.invalidRedisUrl> {
  constructor(message: string) {
    super(ERROR_CODES.invalidRedisUrl, message, {});
  }
}

const SCHEME = /^(rediss?)(\+cluster)?:\/\//i;
const POSTGRES_SCHEME = /^postgres(?:ql)?:\/\//i;
const DEFAULT_PORT = 6379;

/**
 * Parses `REDIS_URL`. A single URL without `+cluster` is a single node and is kept verbatim.
 * @throws {@link RedisUrlError}
 *
 * @example
 * parseRedisUrl('redis+cluster://10.0.0.1:7000,10.0.0.2:7000');
 * // { kind: 'cluster', nodes: [{ host: '10.0.0.1', port: 7000 }, { host: '10.0.0.2', port: 7000 }], tls: false }
 */
export function parseRedisUrl(text: string): RedisTarget {
  if (POSTGRES_SCHEME.test(text.trim())) {
    let u: URL | undefined;
    try {
      u = new URL(text.trim());
    } catch {}
    if (!u?.hostname) throw new RedisUrlError("must be a postgres:// URL naming a host (BullMQ's PostgreSQL backend)");
    return { kind: 'postgres', url: text.trim() };
  }
  const parts = text.split(',').map((p) => p.trim());
  const first = SCHEME.exec(parts[0] ?? '');
  if (!first) {
    throw new RedisUrlError(
      'must be a redis:// (or rediss://) URL, Redis Cluster nodes (redis+cluster://host:port,host:port,…), ' +
        "or a postgres:// URL (BullMQ's PostgreSQL backend)",
    );
  }
  const base = (first[1] as string).toLowerCase();
  const cluster = first[2] !== undefined || parts.length > 1;
  if (!cluster) {
    parseNode(text, base, 1, false);
    return { kind: 'single', url: text };
  }
  const nodes: RedisNode[] = [];
  let username: string | undefined;
  let password: string | undefined;
  for (const [i, part] of parts.entries()) {
    const scheme = SCHEME.exec(part);
    if (scheme && (scheme[1] as string).toLowerCase() !== base) {
      throw new RedisUrlError(`node ${i + 1} mixes ${base}:// and ${scheme[1]}:// (TLS is for every node or none)`);
    }
    const u = parseNode(scheme ? part.slice(scheme[0].length) : part, base, i + 1, true);
    nodes.push({ host: u.hostname.replace(/^\[(.*)\]$/, '$1'), port: u.port ? Number(u.port) : DEFAULT_PORT });
    if (u.username && username === undefined) username = decodeURIComponent(u.username);
    if (u.password && password === undefined) password = decodeURIComponent(u.password);
  }
  return {
    kind: 'cluster',
    nodes,
    tls: base === 'rediss',
    ...(username !== undefined ? { username } : {}),
    ...(password !== undefined ? { password } : {}),
  };
}

function parseNode(text: string, base: string, index: number, inCluster: boolean): URL {
  let u: URL;
  try {
    u = new URL(SCHEME.test(text) ? text : `${base}://${text}`);
  } catch {
    throw new RedisUrlError(
      inCluster
        ? `node ${index} is not host:port (expected redis+cluster://host:port,host:port,…)`
        : 'must be a redis:// (or rediss://) URL',
    );
  }
  if (!u.hostname) throw new RedisUrlError(inCluster ? `node ${index} has no host` : 'must name a host');
  if (!inCluster) {
    if (u.protocol !== 'redis:' && u.protocol !== 'rediss:') throw new RedisUrlError('must be a redis:// URL');
  } else if (u.pathname !== '' && u.pathname !== '/' && u.pathname !== '/0') {
    throw new RedisUrlError(`node ${index} names a database: Redis Cluster has only database 0`);
  }
  return u;
}

/** A target fit for messages and logs: hosts and ports, never a password. */
export function describeRedisTarget(target: RedisTarget): string {
  if (target.kind === 'single' || target.kind === 'postgres') {
    try {
      const u = new URL(target.url);
      return `${u.protocol}//${u.username ? `${u.username}@` : ''}${u.host}${u.pathname === '/' ? '' : u.pathname}`;
    } catch {
      return '(unparseable URL)';
    }
  }
  const user = target.username ? `${target.username}@` : '';
  const hosts = target.nodes.map((n) => (n.host.includes(':') ? `[${n.host}]:${n.port}` : `${n.host}:${n.port}`));
  return `${target.tls ? 'rediss' : 'redis'}+cluster://${user}${hosts.join(',')}`;
}

/** {@link describeRedisTarget} of a `REDIS_URL`, or a placeholder when it does not parse. */
export function describeRedisUrl(url: string): string {
  try {
    return describeRedisTarget(parseRedisUrl(url));
  } catch {
    return '(unparseable URL)';
  }
}

/**
 * Whether every key under `prefix` hashes to one cluster slot: Redis hashes only what lies
 * between the first `{` and the next `}`, when that is not empty. BullMQ's scripts touch several
 * keys of a queue at once, which Redis Cluster allows only within one slot.
 */
export function hasHashTag(prefix: string): boolean {
  const open = prefix.indexOf('{');
  if (open < 0) return false;
  const close = prefix.indexOf('}', open + 1);
  return close > open + 1;
}
