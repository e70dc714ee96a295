import { execFile } from 'node:child_process';
import { chownSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';

const run = promisify(execFile);
const BIN = '/usr/lib/postgresql/15/bin';

/** A free loopback TCP port (the kernel picks it; a later bind can still race, rarely). */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

async function asPostgres(cmd: string, args: string[]): Promise<string> {
  const { stdout } = await run('runuser', ['-u', 'postgres', '--', cmd, ...args], { timeout: 180_000 });
  return stdout;
}

/**
 * A Postgres cluster of a test's own: initdb into a temporary folder, on a free loopback port,
 * trust authentication. For fault tests that stop, restart, pause or cut a database: never the
 * shared one that other test files use at the same time. `destroy()` stops it and removes it.
 *
 * @example
 * const db = await PrivatePostgres.start();
 * const url = db.url();            // postgres://postgres@127.0.0.1:<port>/postgres
 * await db.restart('immediate');   // a crash and recovery
 * await db.destroy();
 */
export class PrivatePostgres {
  private paused = false;

  private constructor(
    readonly dir: string,
    readonly port: number,
  ) {}

  /**
   * @param options.settings server settings passed as `-c name=value` after the defaults (which
   * turn fsync and full-page writes off for speed): a bench that measures WAL turns them on.
   */
  static async start(
    options: { maxConnections?: number; settings?: Record<string, string | number> } = {},
  ): Promise<PrivatePostgres> {
    const dir = mkdtempSync(join(tmpdir(), 'bqi-pg-'));
    chownSync(dir, 101, 104);
    const port = await freePort();
    const db = new PrivatePostgres(dir, port);
    try {
      await db.init(options);
    } catch (err) {
      await db.destroy();
      throw err;
    }
    return db;
  }

  /** initdb, then the first start. */
  private async init(options: { maxConnections?: number; settings?: Record<string, string | number> }): Promise<void> {
    await asPostgres(`${BIN}/initdb`, [
      '-D',
      join(this.dir, 'data'),
      '-U',
      'postgres',
      '--auth=trust',
      '-E',
      'UTF8',
      '--no-sync',
    ]);
    this.maxConnections = options.maxConnections ?? 100;
    this.settings = Object.entries(options.settings ?? {})
      .map(([k, v]) => ` -c ${k}=${v}`)
      .join('');
    await this.startAgain();
  }

  private maxConnections = 100;
  private settings = '';

  /** A connection URL of this cluster. */
  url(database = 'postgres', applicationName?: string): string {
    const u = new URL(`postgres://postgres@127.0.0.1:${this.port}/${database}`);
    if (applicationName) u.searchParams.set('application_name', applicationName);
    return u.toString();
  }

  /** Starts the cluster (again) and waits until it accepts connections. */
  async startAgain(): Promise<void> {
    await asPostgres(`${BIN}/pg_ctl`, [
      '-D',
      join(this.dir, 'data'),
      '-l',
      join(this.dir, 'log'),
      '-w',
      '-t',
      '60',
      '-o',
      `-p ${this.port} -k ${this.dir} -c listen_addresses=127.0.0.1 -c max_connections=${this.maxConnections} -c fsync=off -c synchronous_commit=on -c full_page_writes=off${this.settings}`,
      'start',
    ]);
  }

  /** Stops the cluster: `fast` closes sessions and checkpoints; `immediate` is a crash. */
  async stop(mode: 'fast' | 'immediate' = 'fast'): Promise<void> {
    if (this.paused) this.resume();
    await asPostgres(`${BIN}/pg_ctl`, ['-D', join(this.dir, 'data'), '-m', mode, '-w', '-t', '60', 'stop']);
  }

  async restart(mode: 'fast' | 'immediate' = 'fast'): Promise<void> {
    await this.stop(mode);
    await this.startAgain();
  }

  /**
   * A streaming standby of this cluster: `pg_basebackup -R` (primary_conninfo and standby.signal
   * written), started on a free port of its own with `settings`. The cluster it was made from
   * must be running; `destroy()` the standby too.
   */
  async standby(options: { settings?: Record<string, string | number> } = {}): Promise<PrivatePostgres> {
    const dir = mkdtempSync(join(tmpdir(), 'bqi-pg-standby-'));
    chownSync(dir, 101, 104);
    const db = new PrivatePostgres(dir, await freePort());
    try {
      await asPostgres(`${BIN}/pg_basebackup`, [
        '-h',
        '127.0.0.1',
        '-p',
        String(this.port),
        '-U',
        'postgres',
        '-D',
        join(dir, 'data'),
        '-R',
        '-X',
        'stream',
        '-c',
        'fast',
        '--no-sync',
      ]);
      db.maxConnections = this.maxConnections;
      db.settings = Object.entries(options.settings ?? {})
        .map(([k, v]) => ` -c ${k}=${v}`)
        .join('');
      await db.startAgain();
    } catch (err) {
      await db.destroy();
      throw err;
    }
    return db;
  }

  /** Promotes this standby to a primary and waits until it accepts writes. */
  async promote(): Promise<void> {
    await asPostgres(`${BIN}/pg_ctl`, ['-D', join(this.dir, 'data'), '-w', '-t', '60', 'promote']);
  }

  /** The pids of this cluster's WAL senders (one per standby streaming from it). */
  walSenders(): number[] {
    return this.pids()
      .slice(1)
      .filter((pid) => {
        try {
          return readFileSync(`/proc/${pid}/cmdline`, 'utf8').startsWith('postgres: walsender');
        } catch {
          return false;
        }
      });
  }

  /**
   * The machine lost: SIGKILL the postmaster and every process of the cluster at once (no
   * shutdown, no WAL sent to anyone), then removes the shared memory segment they left.
   */
  kill(): void {
    const pidFile = readFileSync(join(this.dir, 'data', 'postmaster.pid'), 'utf8').split('\n');
    const shmid = (pidFile[6] ?? '').trim().split(/\s+/)[1];
    for (const pid of this.pids()) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
    this.paused = false;
    this.killed = true;
    if (shmid) void run('ipcrm', ['-m', shmid]).catch(() => {});
  }

  private killed = false;

  /** The postmaster's pid and every backend's: what SIGSTOP must reach to freeze the database. */
  private pids(): number[] {
    const master = Number(readFileSync(join(this.dir, 'data', 'postmaster.pid'), 'utf8').split('\n')[0]);
    const children = readFileSync(`/proc/${master}/task/${master}/children`, 'utf8')
      .trim()
      .split(/\s+/)
      .filter(Boolean)
      .map(Number);
    return [master, ...children];
  }

  /** Freezes every process of the cluster (SIGSTOP): connections stay open, nothing answers. */
  pause(): void {
    for (const pid of this.pids()) process.kill(pid, 'SIGSTOP');
    this.paused = true;
  }

  resume(): void {
    for (const pid of this.pids()) process.kill(pid, 'SIGCONT');
    this.paused = false;
  }

  /** Terminates every client backend but this query's own (what a failover or a proxy's idle timeout does). */
  async terminateConnections(): Promise<number> {
    const c = new pg.Client({ connectionString: this.url() });
    await c.connect();
    try {
      const r = await c.query(
        `select count(pg_terminate_backend(pid)) as n from pg_stat_activity
         where pid <> pg_backend_pid() and backend_type = 'client backend'`,
      );
      return Number(r.rows[0]?.n ?? 0);
    } finally {
      await c.end();
    }
  }

  /** Stops the cluster (a crash, it is thrown away) and removes its folder. */
  async destroy(): Promise<void> {
    try {
      if (!this.killed) await this.stop('immediate');
    } catch {
      // already stopped
    }
    rmSync(this.dir, { recursive: true, force: true });
  }
}
