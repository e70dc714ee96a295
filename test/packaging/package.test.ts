import { execFile, spawn } from 'node:child_process';
import { readFileSync, realpathSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import packageJson from '../../package.json' with { type: 'json' };
import { boundedKey } from '../../src/keys/idempotency-key.js';
import { TestContext, waitFor } from '../helpers/context.js';
import {
  CJS_CONSUMER,
  CONSUMER_PACKAGE_JSON,
  CONSUMER_TSCONFIG,
  ESM_CONSUMER,
  SUBPATHS,
} from '../helpers/package-consumer.js';
import { childEnv, collect, finished, ROOT } from '../helpers/spawn.js';

const exec = promisify(execFile);
const NPM = process.platform === 'win32' ? 'npm.cmd' : 'npm';
const INSTALL_TIMEOUT_MS = 5 * 60_000;
/** What the root may export at run time: the runtime, operations, keyrings, the errors a program catches. */
const MAX_ROOT_VALUES = 40;

/**
 * The peers at the versions this repository tests with, except ioredis: its newest major, which
 * BullMQ accepts and the peer range must accept too (an install must not end in ERESOLVE).
 */
const dev = packageJson.devDependencies;
const PEERS = [
  `bullmq@${dev.bullmq}`,
  'ioredis@6.0.0',
  `kysely@${dev.kysely}`,
  `pg@${dev.pg}`,
  `zod@${dev.zod}`,
  `@types/pg@${dev['@types/pg']}`,
  `@types/node@${dev['@types/node']}`,
  `typescript@${dev.typescript}`,
];

/** The environment of a child npm: none of the outer `npm test`'s prefix or package variables. */
function npmEnv(vars: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env = childEnv(vars);
  for (const k of Object.keys(env)) {
    if (/^npm_/i.test(k) && !/^npm_config_(cache|registry|userconfig)$/i.test(k)) delete env[k];
  }
  return env;
}

async function run(cmd: string, args: string[], cwd: string, env = npmEnv()) {
  try {
    const { stdout, stderr } = await exec(cmd, args, { cwd, env, timeout: INSTALL_TIMEOUT_MS, maxBuffer: 64 << 20 });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    return { code: typeof e.code === 'number' ? e.code : -1, stdout: e.stdout ?? '', stderr: e.stderr ?? String(err) };
  }
}

describe('the packed package, installed into a fresh application', { timeout: INSTALL_TIMEOUT_MS }, () => {
  let tmp = '';
  let app = '';
  let packed: { filename: string; files: { path: string }[] };
  let install: Awaited<ReturnType<typeof run>>;

  beforeAll(async () => {
    tmp = await mkdtemp(join(tmpdir(), 'bqi-package-'));
    app = join(tmp, 'app');
    const pack = await run(NPM, ['pack', '--json', '--pack-destination', tmp], ROOT);
    expect(pack.code, pack.stdout + pack.stderr).toBe(0);
    packed = (JSON.parse(pack.stdout) as (typeof packed)[])[0]!;

    await run('mkdir', [app], tmp);
    await writeFile(join(app, 'package.json'), CONSUMER_PACKAGE_JSON);
    await writeFile(join(app, 'tsconfig.json'), CONSUMER_TSCONFIG);
    await writeFile(join(app, 'consumer.ts'), ESM_CONSUMER);
    await writeFile(join(app, 'consumer.cjs'), CJS_CONSUMER);
    install = await run(
      NPM,
      ['install', '--no-audit', '--no-fund', '--prefer-offline', join(tmp, packed.filename), ...PEERS],
      app,
    );
  }, INSTALL_TIMEOUT_MS);

  afterAll(async () => {
    if (tmp) await rm(tmp, { recursive: true, force: true });
  });

  it('ships the build, the README and the LICENSE; no sources, maps or tests', () => {
    const files = packed.files.map((f) => f.path);

    for (const f of [
      packageJson.main,
      packageJson.types,
      packageJson.bin['bullmq-idempotency'],
      ...Object.values(packageJson.exports).flatMap((e) => (typeof e === 'string' ? [e] : Object.values(e))),
    ]) {
      expect(files).toContain(f.replace(/^\.\//, ''));
    }
    expect(files).toEqual(expect.arrayContaining(['LICENSE', 'README.md', 'package.json']));
    expect(files.filter((f) => f.endsWith('.map'))).toEqual([]);
    expect(
      files.filter((f) => !f.startsWith('dist/') && !['LICENSE', 'README.md', 'package.json'].includes(f)),
    ).toEqual([]);
  });

  it('installs beside its peers (ioredis 6 included) without a conflict', async () => {
    expect(install.code, install.stderr).toBe(0);
    expect(install.stderr).not.toMatch(/ERESOLVE|peer dep/i);
    const ls = await run(NPM, ['ls', '--all'], app);
    expect(ls.code, ls.stdout + ls.stderr).toBe(0);
  });

  it('type-checks an ESM consumer under strict, exactOptionalPropertyTypes and noUncheckedIndexedAccess', async () => {
    const tsc = await run(process.execPath, [join(app, 'node_modules/typescript/bin/tsc'), '-p', '.'], app);
    expect(tsc.code, tsc.stdout + tsc.stderr).toBe(0);
  });

  it("runs the ESM consumer: one runtime's migrate, claim, complete, replay, unseal; its worker and timeline; every subpath; drop its schema", async () => {
    const databaseUrl = inject('databaseUrl');
    const schema = `bqi_package_${Date.now().toString(36)}`;

    const consumer = await run(
      process.execPath,
      ['consumer.js', schema],
      app,
      npmEnv({ DATABASE_URL: databaseUrl, REDIS_URL: inject('redisUrl') }),
    );

    expect(consumer.code, consumer.stderr).toBe(0);
    expect(consumer.stdout.trim().split('\n')).toEqual([
      'ok completed epoch 1 ch_1',
      'job ch_2 true added again: false (completed)',
      'story completed',
      'subpaths function function function function function function',
    ]);
    const admin = new pg.Client({ connectionString: databaseUrl });
    await admin.connect();
    const left = await admin.query('select 1 from pg_namespace where nspname = $1', [schema]);
    await admin.end();
    expect(left.rowCount).toBe(0);
  });

  it(`is require()d by a CommonJS consumer, root and subpaths; the root has at most ${MAX_ROOT_VALUES} runtime values`, async () => {
    const consumer = await run(process.execPath, ['consumer.cjs'], app);

    expect(consumer.code, consumer.stderr).toBe(0);
    expect(consumer.stderr).toBe('');
    const [key, root, ...subpaths] = consumer.stdout.trim().split('\n');
    expect(key).toBe(boundedKey({ namespace: 'acme/payments.charge', resourceKey: 'order:42', version: 'v1' }));
    const [kind, count] = (root ?? '').split(' ');
    expect(kind).toBe('function');
    expect(Number(count)).toBeGreaterThan(0);
    expect(Number(count)).toBeLessThanOrEqual(MAX_ROOT_VALUES);
    expect(subpaths.map((l) => l.split(' ')[0])).toEqual([...SUBPATHS]);
    for (const l of subpaths) expect(Number(l.split(' ')[1]), l).toBeGreaterThan(0);
  });

  it('installs its command', async () => {
    const cli = await run(join(app, 'node_modules/.bin/bullmq-idempotency'), ['--version'], app);

    expect(cli.code, cli.stderr).toBe(0);
    expect(cli.stdout.trim()).toBe(packageJson.version);
  });

  it('runs the operations process as docs/operations.md deploys it: migrate, start, /healthz and /readyz, SIGTERM exits 0 with no process left', async () => {
    const bin = join(app, 'node_modules/.bin/bullmq-idempotency');
    // The Dockerfile and systemd unit of docs/operations.md run node on the file the bin links to.
    const readme = readFileSync(join(ROOT, 'docs/operations.md'), 'utf8');
    const cmd = JSON.parse(/^CMD (\[.*\])$/m.exec(readme)?.[1] ?? 'null') as string[];
    expect(cmd).toEqual(['node', expect.stringMatching(/^node_modules\/bullmq-idempotency\//), 'start']);
    expect(realpathSync(join(app, cmd[1] as string))).toBe(realpathSync(bin));
    expect(readme).toContain(`ExecStart=/usr/bin/node ${cmd[1]} start`);

    const t = new TestContext('package_start');
    const port = await freePort();
    const env = npmEnv({
      DATABASE_URL: t.databaseUrl,
      REDIS_URL: t.redisUrl,
      BQI_SCHEMA: t.schema,
      BQI_PREFIX: t.prefix,
      BQI_HTTP_PORT: String(port),
      BQI_HTTP_HOST: '127.0.0.1',
      BQI_SHUTDOWN_TIMEOUT_MS: '10s',
    });
    try {
      const migrated = await run(bin, ['migrate'], app, env);
      expect(migrated.code, migrated.stderr).toBe(0);
      expect(migrated.stdout).toContain(`in schema ${t.schema}`);

      // Its own process group: whatever it started would still be in the group after it exits.
      const child = collect(
        spawn(bin, ['start'], { cwd: app, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] }),
      );
      const exit = finished(child, INSTALL_TIMEOUT_MS, 'bullmq-idempotency start');
      const group = child.pid as number;
      try {
        const started = (await waitFor(
          () => logLines(child.out).find((l) => l.msg === 'started'),
          `the 'started' log line\n${child.out}\n${child.err}`,
          120_000,
          50,
        )) as Record<string, unknown>;
        // Node itself, not a shell before it: a supervisor's SIGTERM reaches the process.
        expect(started.pid).toBe(child.pid);
        expect(started.http).toEqual({ host: '127.0.0.1', port });
        expect(await getJson(port, '/healthz')).toEqual({ status: 200, body: { status: 'ok' } });
        expect(await getJson(port, '/readyz')).toEqual({
          status: 200,
          body: { status: 'ready', postgres: 'ok', redis: 'ok', schedules: 'ok' },
        });

        child.kill('SIGTERM');
        const r = await exit;
        expect(r.code, r.stdout + r.stderr).toBe(0);
        expect(r.stderr).toBe('');
        expect(logLines(r.stdout).map((l) => l.msg)).toEqual(expect.arrayContaining(['shutting down', 'stopped']));
        await waitFor(() => !groupAlive(group), `process group ${group} to be empty`, 10_000);
      } finally {
        if (groupAlive(group)) process.kill(-group, 'SIGKILL');
      }
    } finally {
      await t.teardown();
    }
  });
});

/** The JSON log lines of the operations process's stdout. */
function logLines(out: string): { msg: string; [k: string]: unknown }[] {
  return out
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as { msg: string });
}

/** True while any process of the group `pgid` is alive. */
function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch {
    return false;
  }
}

/** A port nothing listens on now (the kernel's pick for port 0, released at once). */
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

async function getJson(port: number, path: string) {
  const res = await fetch(`http://127.0.0.1:${port}${path}`);
  return { status: res.status, body: (await res.json()) as unknown };
}
