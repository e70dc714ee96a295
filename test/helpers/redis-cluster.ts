import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { freePort } from './private-postgres.js';

const run = promisify(execFile);

/**
 * A real Redis Cluster of a test's own: `masters` redis-server processes on free loopback ports,
 * no replicas, no persistence, in a temporary folder. `destroy()` kills every process and removes
 * the folder (call it in `afterAll`, also after a failed start: `start` cleans up itself).
 *
 * @example
 * const cluster = await RedisCluster.start();
 * const url = cluster.url();   // redis+cluster://127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3
 * await cluster.destroy();
 */
export class RedisCluster {
  private readonly servers: ChildProcess[] = [];

  private constructor(
    readonly dir: string,
    readonly ports: number[],
  ) {}

  static async start(masters = 3): Promise<RedisCluster> {
    const dir = mkdtempSync(join(tmpdir(), 'bqi-redis-cluster-'));
    const ports: number[] = [];
    while (ports.length < masters) {
      const p = await freePort();
      if (!ports.includes(p)) ports.push(p);
    }
    const cluster = new RedisCluster(dir, ports);
    try {
      for (const port of ports) cluster.servers.push(cluster.server(port));
      await Promise.all(ports.map((port) => cluster.waitFor(port, (out) => out.trim() === 'PONG', ['ping'])));
      await run(
        'redis-cli',
        ['--cluster', 'create', ...ports.map((p) => `127.0.0.1:${p}`), '--cluster-replicas', '0', '--cluster-yes'],
        { timeout: 30_000 },
      );
      await Promise.all(
        ports.map((port) => cluster.waitFor(port, (out) => out.includes('cluster_state:ok'), ['cluster', 'info'])),
      );
      return cluster;
    } catch (err) {
      await cluster.destroy();
      throw err;
    }
  }

  /** `redis+cluster://` with every node. */
  url(): string {
    return `redis+cluster://${this.nodes().join(',')}`;
  }

  /** `host:port` of every node. */
  nodes(): string[] {
    return this.ports.map((p) => `127.0.0.1:${p}`);
  }

  /** Runs redis-cli against one node. */
  async cli(port: number, ...args: string[]): Promise<string> {
    const { stdout } = await run('redis-cli', ['-h', '127.0.0.1', '-p', String(port), ...args], { timeout: 10_000 });
    return stdout;
  }

  /** Kills the servers (and waits for them to exit), then removes the folder. */
  async destroy(): Promise<void> {
    await Promise.all(
      this.servers.map(
        (s) =>
          new Promise<void>((resolve) => {
            if (s.exitCode !== null || s.signalCode !== null) return resolve();
            s.once('exit', () => resolve());
            s.kill('SIGKILL');
          }),
      ),
    );
    rmSync(this.dir, { recursive: true, force: true });
  }

  private server(port: number): ChildProcess {
    const child = spawn(
      'redis-server',
      [
        '--port',
        String(port),
        '--bind',
        '127.0.0.1',
        '--cluster-enabled',
        'yes',
        '--cluster-config-file',
        join(this.dir, `nodes-${port}.conf`),
        '--cluster-node-timeout',
        '5000',
        '--dir',
        this.dir,
        '--save',
        '',
        '--appendonly',
        'no',
        '--maxmemory-policy',
        'noeviction',
      ],
      { stdio: 'ignore' },
    );
    child.on('error', () => {}); // surfaced by the readiness check
    return child;
  }

  private async waitFor(port: number, ok: (out: string) => boolean, args: string[], timeoutMs = 30_000) {
    const deadline = Date.now() + timeoutMs;
    let last = '';
    for (;;) {
      last = await this.cli(port, ...args).catch((err: Error) => err.message);
      if (ok(last)) return;
      if (Date.now() > deadline) throw new Error(`redis ${port}: ${args.join(' ')} still says ${last}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}
