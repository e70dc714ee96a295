import { type ChildProcess, spawn } from 'node:child_process';
import { chownSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { freePort } from './private-postgres.js';

/** Debian's pgbouncer (package `pgbouncer`). */
export const PGBOUNCER = '/usr/sbin/pgbouncer';

export type PgbouncerOptions = {
  /** The Postgres behind it. @defaultValue 127.0.0.1:5432 */
  host?: string;
  port?: number;
  /** The database served, under the same name. @defaultValue `'test'` */
  database?: string;
  /** @defaultValue `'transaction'` */
  poolMode?: 'session' | 'transaction' | 'statement';
  /** Server connections per database and user: fewer than clients, so clients share them. @defaultValue 4 */
  poolSize?: number;
};

/**
 * A pgbouncer of a test's own, on a free loopback port, configured in a temporary folder, trust
 * authentication. Runs as the `postgres` user (pgbouncer refuses root). `stop()` kills it (and its
 * server connections go with it) and removes the folder.
 *
 * @example
 * const bouncer = await Pgbouncer.start({ poolMode: 'transaction' });
 * const url = bouncer.url('my_app');   // postgres://postgres@127.0.0.1:<port>/test?application_name=my_app
 * await bouncer.stop();
 */
export class Pgbouncer {
  private exited = false;

  private constructor(
    readonly dir: string,
    readonly port: number,
    readonly database: string,
    private readonly child: ChildProcess,
  ) {
    child.once('exit', () => {
      this.exited = true;
    });
  }

  static async start(options: PgbouncerOptions = {}): Promise<Pgbouncer> {
    const dir = mkdtempSync(join(tmpdir(), 'bqi-pgbouncer-'));
    const database = options.database ?? 'test';
    let child: ChildProcess | undefined;
    try {
      const port = await freePort();
      const ini = join(dir, 'pgbouncer.ini');
      writeFileSync(join(dir, 'userlist.txt'), '"postgres" ""\n');
      writeFileSync(
        ini,
        [
          '[databases]',
          `${database} = host=${options.host ?? '127.0.0.1'} port=${options.port ?? 5432} dbname=${database}`,
          '[pgbouncer]',
          'listen_addr = 127.0.0.1',
          `listen_port = ${port}`,
          'unix_socket_dir =',
          'auth_type = trust',
          `auth_file = ${join(dir, 'userlist.txt')}`,
          `pool_mode = ${options.poolMode ?? 'transaction'}`,
          `default_pool_size = ${options.poolSize ?? 4}`,
          'max_client_conn = 500',
          `logfile = ${join(dir, 'pgbouncer.log')}`,
          `pidfile = ${join(dir, 'pgbouncer.pid')}`,
          // Server connections close soon after use, so none outlives the test for long.
          'server_idle_timeout = 5',
          '',
        ].join('\n'),
      );
      chownSync(dir, 101, 104);
      for (const f of ['pgbouncer.ini', 'userlist.txt']) chownSync(join(dir, f), 101, 104);
      child = spawn('runuser', ['-u', 'postgres', '--', PGBOUNCER, ini], { stdio: ['ignore', 'ignore', 'pipe'] });
      let stderr = '';
      child.stderr?.setEncoding('utf8').on('data', (d: string) => {
        stderr += d;
      });
      const bouncer = new Pgbouncer(dir, port, database, child);
      const deadline = Date.now() + 20_000;
      while (!(await bouncer.accepts())) {
        if (bouncer.exited) throw new Error(`pgbouncer exited: ${stderr}\n${bouncer.log()}`);
        if (Date.now() > deadline) throw new Error(`pgbouncer did not accept connections: ${stderr}\n${bouncer.log()}`);
        await new Promise((r) => setTimeout(r, 100));
      }
      return bouncer;
    } catch (err) {
      child?.kill('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
      throw err;
    }
  }

  /** True once a query goes through to Postgres. */
  private async accepts(): Promise<boolean> {
    const client = new pg.Client({ connectionString: this.url('bqi_pgbouncer_probe') });
    client.on('error', () => {});
    try {
      await client.connect();
      await client.query('select 1');
      return true;
    } catch {
      return false;
    } finally {
      await client.end().catch(() => {});
    }
  }

  /** A connection string through the bouncer. */
  url(applicationName?: string): string {
    const u = new URL(`postgres://postgres@127.0.0.1:${this.port}/${this.database}`);
    if (applicationName) u.searchParams.set('application_name', applicationName);
    return u.toString();
  }

  /** pgbouncer's own log, for failure messages. */
  log(): string {
    try {
      return readFileSync(join(this.dir, 'pgbouncer.log'), 'utf8');
    } catch {
      return '';
    }
  }

  /** Kills pgbouncer (SIGTERM: immediate shutdown, server connections closed), waits for it, removes its folder. */
  async stop(): Promise<void> {
    try {
      const pid = this.pid();
      if (!this.exited) {
        const gone = new Promise((resolve) => this.child.once('exit', resolve));
        this.child.kill('SIGTERM'); // runuser passes it on to pgbouncer
        const timer = setTimeout(() => this.child.kill('SIGKILL'), 5_000);
        await gone;
        clearTimeout(timer);
      }
      // pgbouncer itself, should runuser have gone first.
      if (pid !== undefined) {
        const deadline = Date.now() + 5_000;
        while (alive(pid)) {
          process.kill(pid, Date.now() > deadline ? 'SIGKILL' : 'SIGTERM');
          await new Promise((r) => setTimeout(r, 50));
        }
      }
    } finally {
      rmSync(this.dir, { recursive: true, force: true });
    }
  }

  private pid(): number | undefined {
    try {
      const pid = Number(readFileSync(join(this.dir, 'pgbouncer.pid'), 'utf8').trim());
      return Number.isInteger(pid) && pid > 0 ? pid : undefined;
    } catch {
      return undefined;
    }
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
