/**
 * A Redis server of the bench's own, as durable as a synchronous Postgres commit: every write
 * appended to its AOF and fsynced before the reply (`--appendonly yes --appendfsync always`), no
 * RDB snapshots (`--save ''`). It listens on a free loopback port (127.0.0.1 only), keeps its
 * files in a fresh temporary directory, and is stopped and that directory removed by `stop()`,
 * on SIGINT, SIGTERM or SIGHUP (after which the signal is raised again, so the process ends as it
 * would have), and, as a last resort, when the process exits.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { freePort } from '../../test/helpers/private-postgres.js';

const HOST = '127.0.0.1';
/** How long the server may take to answer PING after it was started. */
const START_MS = 10_000;
/** How long a stopped server may take to exit before it is killed. */
const STOP_MS = 5_000;
/** Ports tried in turn: another process may take the free port between the test and the bind. */
const ATTEMPTS = 5;
/** Signals on which the server is stopped and its directory removed before the process ends. */
const SIGNALS: NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP'];

export type PrivateRedis = {
  /** redis://127.0.0.1:port */
  url: string;
  port: number;
  /** The server's pid: its CPU is read from /proc/<pid>/stat. */
  pid: number;
  /** Its working directory (the AOF), removed by stop(). */
  dir: string;
  /** Stops the server (SIGTERM, then SIGKILL) and removes its directory; later calls wait for the first. */
  stop(): Promise<void>;
};

/** Thrown when there is no `redis-server` to run: a caller skips what needs it. */
export class RedisServerMissing extends Error {}

/** One command and its reply, on a connection of its own; undefined if nothing answers within a second. */
async function ask(port: number, command: string, ...args: string[]): Promise<unknown> {
  const client = new Redis({
    host: HOST,
    port,
    lazyConnect: true,
    connectTimeout: 1000,
    commandTimeout: 1000,
    maxRetriesPerRequest: 0,
    enableOfflineQueue: false,
    retryStrategy: () => null,
  });
  client.on('error', () => {}); // a server not up yet: the answer is undefined
  try {
    await client.connect();
    return await client.call(command, ...args);
  } catch {
    return undefined;
  } finally {
    client.disconnect();
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The value CONFIG GET returns for `name` (a two-element array reply). */
async function configValue(port: number, name: string): Promise<string | undefined> {
  const reply = await ask(port, 'CONFIG', 'GET', name);
  return Array.isArray(reply) && typeof reply[1] === 'string' ? reply[1] : undefined;
}

function exited(child: ChildProcess): boolean {
  return child.exitCode !== null || child.signalCode !== null;
}

/** Kills a server that failed to start, and waits until it has exited. */
async function kill(child: ChildProcess): Promise<void> {
  if (exited(child)) return;
  const gone = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGKILL');
  await gone;
}

type Started = { child: ChildProcess; port: number } | { error: string };

async function startOn(dir: string, binary: string): Promise<Started> {
  const port = await freePort();
  const args = ['--port', String(port), '--bind', HOST, '--dir', dir, '--save', '', '--appendonly', 'yes'];
  args.push('--appendfsync', 'always', '--daemonize', 'no', '--loglevel', 'warning', '--logfile', '');
  const child = spawn(binary, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  const keep = (chunk: Buffer) => {
    output = (output + chunk.toString('utf8')).slice(-2000);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  let spawnError: NodeJS.ErrnoException | undefined;
  child.once('error', (error) => {
    spawnError = error;
  });
  const deadline = Date.now() + START_MS;
  for (;;) {
    if (spawnError?.code === 'ENOENT')
      throw new RedisServerMissing(`redis-server is not installed (${binary} not found)`);
    if (spawnError) return { error: `${binary} could not be started: ${spawnError.message}` };
    if (exited(child))
      return { error: `${binary} exited at start (${child.exitCode ?? child.signalCode}): ${output.trim()}` };
    if ((await ask(port, 'PING')) === 'PONG') break;
    if (Date.now() > deadline) {
      await kill(child);
      return { error: `${binary} did not answer on port ${port} within ${START_MS} ms: ${output.trim()}` };
    }
    await sleep(50);
  }
  // Something else may have taken the port first: the server answering must be the one started here.
  const info = await ask(port, 'INFO', 'server');
  const pid = typeof info === 'string' ? /process_id:(\d+)/.exec(info)?.[1] : undefined;
  if (Number(pid) !== child.pid) {
    await kill(child);
    return { error: `port ${port} is answered by pid ${pid}, not the server started (${child.pid})` };
  }
  child.stdout?.off('data', keep);
  child.stderr?.off('data', keep);
  child.stdout?.resume();
  child.stderr?.resume();
  return { child, port };
}

/**
 * Starts the server and waits until it answers. Throws RedisServerMissing when `binary` (a name
 * looked up on the PATH, or a path) is not there, another Error when it cannot be started or does
 * not run as asked.
 */
export async function startPrivateRedis(binary = 'redis-server'): Promise<PrivateRedis> {
  const dir = mkdtempSync(join(tmpdir(), 'bench-redis-'));
  let child: ChildProcess | undefined;
  let port = 0;
  const removeDir = () => rmSync(dir, { recursive: true, force: true, maxRetries: 5, retryDelay: 50 });
  // The last resort, for an exit that skips stop(): synchronous, so only a kill and a removal.
  const onExit = () => {
    if (child && !exited(child)) child.kill('SIGKILL');
    removeDir();
  };
  process.once('exit', onExit);
  let stopping: Promise<void> | undefined;
  const stop = (): Promise<void> => {
    stopping ??= (async () => {
      for (const signal of SIGNALS) process.off(signal, onSignal);
      if (child && !exited(child)) {
        const running = child;
        const gone = new Promise<void>((resolve) => running.once('exit', () => resolve()));
        running.kill('SIGTERM');
        const timer = setTimeout(() => running.kill('SIGKILL'), STOP_MS);
        await gone;
        clearTimeout(timer);
      }
      removeDir();
      process.off('exit', onExit);
    })();
    return stopping;
  };
  const onSignal = (signal: NodeJS.Signals) => {
    void stop().finally(() => process.kill(process.pid, signal));
  };
  for (const signal of SIGNALS) process.once(signal, onSignal);

  try {
    const errors: string[] = [];
    for (let attempt = 0; attempt < ATTEMPTS && !child; attempt++) {
      const started = await startOn(dir, binary);
      if ('error' in started) errors.push(started.error);
      else ({ child, port } = started);
    }
    if (!child) throw new Error(`could not start ${binary}: ${errors.join('; ')}`);
    const settings = {
      appendonly: await configValue(port, 'appendonly'),
      appendfsync: await configValue(port, 'appendfsync'),
      save: await configValue(port, 'save'),
      bind: await configValue(port, 'bind'),
    };
    if (
      settings.appendonly !== 'yes' ||
      settings.appendfsync !== 'always' ||
      settings.save !== '' ||
      settings.bind !== HOST
    ) {
      throw new Error(`${binary} runs with ${JSON.stringify(settings)}, not as started`);
    }
    return { url: `redis://${HOST}:${port}`, port, pid: child.pid!, dir, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}
