/**
 * Every TypeScript example of README.md and docs/*.md is a complete program that runs as written.
 *
 * A ```ts block is a program: it is type-checked with the project's strict options (the package
 * name mapped to src/index.ts, `bullmq-idempotency/testing` to src/testing/index.ts, the other
 * subpaths to src/entries/*), then run as a child process with the DATABASE_URL and REDIS_URL of
 * the test run, and must exit 0 within a bound. A block that is not a whole program (an option's
 * shape, a one-liner) is marked ```ts fragment and is skipped; so are other languages.
 *
 * Each program names its own Postgres schema and BullMQ prefix (`schema: '…'`, `prefix: '…'`), as
 * a user moving to their own would edit them; no two programs share one. The harness drops each
 * program's schema and deletes its prefix's Redis keys before and after it runs (never FLUSHDB),
 * in a database and a Redis database of this run alone, so runs in parallel never meet.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import pg from 'pg';
import ts from 'typescript';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { removeDemoData } from '../../scripts/demo-data.js';
import { CHILD_BUILD_ENV } from '../helpers/child-build.js';
import { childEnv, collect, type Finished, finished, ROOT } from '../helpers/spawn.js';

/** How long one program may take: a bound on a hang only (they take a few seconds). */
const PROGRAM_TIMEOUT_MS = 60_000;

type Program = { name: string; doc: string; line: number; source: string; schema: string; prefix?: string };

/** The ```ts blocks of a Markdown file, with the line each starts on. ```ts fragment blocks are left out. */
function programBlocks(doc: string, text: string): Program[] {
  const found: Program[] = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const info = /^```(\S*)(.*)$/.exec(lines[i] as string);
    if (!info) continue;
    const end = lines.findIndex((l, j) => j > i && l.startsWith('```'));
    const lang = info[1] as string;
    if (lang === 'ts' && (info[2] as string).trim() === '') {
      const source = lines.slice(i + 1, end).join('\n');
      const schema = /\bschema: '([a-z_][a-z0-9_]*)'/.exec(source)?.[1] ?? '';
      const prefix = /\bprefix: '([^']+)'/.exec(source)?.[1];
      const name = `${doc.replace(/\W+/g, '-').replace(/^-|-$/g, '')}-${i + 2}`;
      found.push({ name, doc, line: i + 2, source, schema, ...(prefix === undefined ? {} : { prefix }) });
    }
    i = end < 0 ? lines.length : end;
  }
  return found;
}

const DOCS = [
  'README.md',
  ...readdirSync(join(ROOT, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .sort()
    .map((f) => `docs/${f}`),
];
const PROGRAMS = DOCS.flatMap((doc) => programBlocks(doc, readFileSync(join(ROOT, doc), 'utf8')));

/** The library's import specifiers and the source file each stands for. */
function librarySource(sub: string | undefined): string {
  if (sub === undefined) return 'src/index.ts';
  return sub === 'testing' ? 'src/testing/index.ts' : `src/entries/${sub}.ts`;
}
const LIBRARY_IMPORT = /from 'bullmq-idempotency(?:\/([a-z]+))?'/g;

/**
 * A directory for the programs laid out as an application's: a package.json (ESM) and the
 * repository's node_modules, so `bullmq`, `zod` and `pg` resolve as they would for a user.
 */
function applicationDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'bqi-docs-programs-'));
  writeFileSync(join(dir, 'package.json'), '{ "type": "module", "private": true }\n');
  symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'), 'dir');
  mkdirSync(join(dir, 'programs'));
  return dir;
}

/**
 * The file a child runs for a program: with the run's child build, the program transpiled to
 * JavaScript importing the built library; without one, the TypeScript importing the sources,
 * run through tsx. Only the library's specifiers change.
 */
function runnable(dir: string, p: Program): string[] {
  const build = process.env[CHILD_BUILD_ENV];
  if (build) {
    const source = p.source.replace(LIBRARY_IMPORT, (_all, sub: string | undefined) => {
      return `from '${join(build, librarySource(sub).replace(/\.ts$/, '.js'))}'`;
    });
    const js = ts.transpileModule(source, {
      compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022, verbatimModuleSyntax: true },
    }).outputText;
    const file = join(dir, 'programs', `${p.name}.js`);
    writeFileSync(file, js);
    return [file];
  }
  const file = join(dir, 'programs', `${p.name}.run.ts`);
  writeFileSync(
    file,
    p.source.replace(LIBRARY_IMPORT, (_all, sub) => `from '${join(ROOT, librarySource(sub))}'`),
  );
  return ['--import', 'tsx', file];
}

/** Type-checks the programs as written, each a module of its own. */
function typeCheck(dir: string, programs: Program[]): Record<string, string[]> {
  const files = programs.map((p) => {
    const file = join(dir, 'programs', `${p.name}.ts`);
    writeFileSync(file, p.source);
    return file;
  });
  const config = ts.readConfigFile(join(ROOT, 'tsconfig.json'), ts.sys.readFile);
  const parsed = ts.parseJsonConfigFileContent(config.config, ts.sys, ROOT);
  // The programs live outside the repository, as an application's files do: no rootDir of ours.
  const { rootDir: _rootDir, ...options } = parsed.options;
  const program = ts.createProgram(files, {
    ...options,
    noEmit: true,
    paths: {
      'bullmq-idempotency': [join(ROOT, 'src/index.ts')],
      'bullmq-idempotency/testing': [join(ROOT, 'src/testing/index.ts')],
      'bullmq-idempotency/*': [join(ROOT, 'src/entries/*.ts')],
    },
  });
  const byProgram: Record<string, string[]> = {};
  for (const d of ts.getPreEmitDiagnostics(program)) {
    const i = files.indexOf(d.file?.fileName ?? '');
    if (i < 0) continue;
    const p = programs[i] as Program;
    const { line } = d.file?.getLineAndCharacterOfPosition(d.start ?? 0) ?? { line: 0 };
    const at = `${p.doc}:${p.line + line}`;
    byProgram[at] = [...(byProgram[at] ?? []), ts.flattenDiagnosticMessageText(d.messageText, '\n')];
  }
  return byProgram;
}

/** A fresh Postgres database for this run, dropped afterwards. */
async function createDatabase(url: string): Promise<{ url: string; drop(): Promise<void> }> {
  const name = `bqi_docs_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  try {
    await admin.query(`create database ${name}`);
  } finally {
    await admin.end();
  }
  const dbUrl = new URL(url);
  dbUrl.pathname = `/${name}`;
  return {
    url: dbUrl.toString(),
    drop: async () => {
      const c = new pg.Client({ connectionString: url });
      await c.connect();
      try {
        await c.query(`drop database if exists ${name} with (force)`);
      } finally {
        await c.end();
      }
    },
  };
}

/** A Redis database (1-15) of this run alone, leased through a key in database 0. */
async function leaseRedisDatabase(url: string): Promise<{ url: string; release(): Promise<void> }> {
  const lock = new Redis(url);
  const token = randomBytes(8).toString('hex');
  try {
    for (const end = Date.now() + 120_000; Date.now() < end; await new Promise((r) => setTimeout(r, 500))) {
      for (let n = 1; n <= 15; n++) {
        if ((await lock.set(`bqi-docs-programs:db:${n}`, token, 'PX', 600_000, 'NX')) !== 'OK') continue;
        const dbUrl = new URL(url);
        dbUrl.pathname = `/${n}`;
        return {
          url: dbUrl.toString(),
          release: async () => {
            const r = new Redis(url);
            try {
              if ((await r.get(`bqi-docs-programs:db:${n}`)) === token) await r.del(`bqi-docs-programs:db:${n}`);
            } finally {
              await r.quit();
            }
          },
        };
      }
    }
    throw new Error('no Redis database 1-15 was free for the docs programs');
  } finally {
    await lock.quit();
  }
}

/** Drops the program's schema and deletes its prefix's keys, as the demo removes a run's data. */
function cleanUp(p: Program, databaseUrl: string, redisUrl: string): Promise<void> {
  const place = { id: p.name, schema: p.schema, prefix: `${p.prefix ?? p.schema}:` };
  return removeDemoData(place, databaseUrl, redisUrl);
}

let dir: string;
let database: Awaited<ReturnType<typeof createDatabase>>;
let redisDb: Awaited<ReturnType<typeof leaseRedisDatabase>>;

/** Runs a program in this run's database and Redis database, cleaned before and after. */
async function run(p: Program, env: Record<string, string> = {}): Promise<Finished> {
  await cleanUp(p, database.url, redisDb.url);
  try {
    const child = collect(
      spawn(process.execPath, runnable(dir, p), {
        cwd: ROOT,
        env: childEnv({ DATABASE_URL: database.url, REDIS_URL: redisDb.url, NODE_ENV: 'development', ...env }),
        stdio: ['ignore', 'pipe', 'pipe'],
      }),
    );
    return await finished(child, PROGRAM_TIMEOUT_MS, `${p.doc}:${p.line}`);
  } finally {
    await cleanUp(p, database.url, redisDb.url);
  }
}

beforeAll(async () => {
  dir = applicationDir();
  database = await createDatabase(inject('databaseUrl'));
  redisDb = await leaseRedisDatabase(inject('redisUrl'));
}, 150_000);

afterAll(async () => {
  await redisDb?.release();
  await database?.drop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('the examples of README.md and docs/*.md', () => {
  it('finds the programs: the README has one, every guide but the records, the layout and the reference pages has at least one', () => {
    const docsWith = new Set(PROGRAMS.map((p) => p.doc));
    expect(PROGRAMS.filter((p) => p.doc === 'README.md')).toHaveLength(1);
    for (const doc of DOCS.filter(
      (d) =>
        ![
          'docs/performance.md',
          'docs/replication.md',
          'docs/operators.md',
          'docs/layout.md',
          'docs/sealing-keys.md',
          'docs/audit-verify.md',
          'docs/life-of-a-job.md', // a map of the code, checked by test/unit/life-of-a-job.test.ts
          'docs/nestjs.md', // decorators: its recipe runs in test/integration/nestjs.test.ts
          'docs/postgres-only.md', // its configuration runs in test/processes/pg-backend.test.ts
        ].includes(d),
    )) {
      if (doc !== 'README.md') expect(docsWith.has(doc), `${doc} has no program`).toBe(true);
    }
    // A TypeScript block is a program or marked a fragment: no other spelling slips past the harness.
    for (const doc of DOCS) {
      const infos = [...readFileSync(join(ROOT, doc), 'utf8').matchAll(/^```(\S+)(.*)$/gm)].map(
        (m) => `${m[1]}${m[2]}`,
      );
      expect(
        infos.filter((i) => /^(typescript|js|javascript|tsx|mjs)\b/.test(i) || /^ts\s+(?!fragment$)/.test(i)),
        doc,
      ).toEqual([]);
    }
  });

  it('each program names a schema and a prefix of its own', () => {
    const schemas = PROGRAMS.map((p) => p.schema);
    expect(
      schemas.filter((s) => s === ''),
      "a program without schema: '…'",
    ).toEqual([]);
    expect(new Set(schemas).size).toBe(schemas.length);
    const prefixes = PROGRAMS.flatMap((p) => (p.prefix === undefined ? [] : [p.prefix]));
    expect(new Set(prefixes).size).toBe(prefixes.length);
    // The README's and the guides' programs that open queues name their prefix in the program.
    for (const p of PROGRAMS) {
      if (/createIdempotency\(/.test(p.source)) expect(p.prefix, `${p.doc}:${p.line}`).toBeDefined();
    }
  });

  it('type-check as written, with the strict options of the project', () => {
    expect(typeCheck(dir, PROGRAMS)).toEqual({});
  }, 180_000);

  for (const p of PROGRAMS) {
    it(
      `${p.doc}:${p.line} runs and exits 0 (schema ${p.schema})`,
      async () => {
        const r = await run(p);
        expect(r.code, `${r.stdout}\n${r.stderr}`).toBe(0);
      },
      PROGRAM_TIMEOUT_MS + 30_000,
    );
  }
});

describe("the README's example against a payments API that cannot be reached", () => {
  const readme = PROGRAMS.find((p) => p.doc === 'README.md') as Program;

  it(
    'still exits: its attempts are bounded, and the program ends non-zero with the job failed',
    async () => {
      const r = await run(readme, { PAYMENTS_URL: 'http://payments.invalid/charges' });
      expect(r.signal).toBeNull();
      expect(r.code).toBe(1);
      expect(r.stdout).not.toContain('charged once');
    },
    PROGRAM_TIMEOUT_MS + 30_000,
  );

  it(
    'shows the real cause on stderr at the first failed attempt (the runtime logs to stderr in development)',
    async () => {
      const r = await run(readme, { PAYMENTS_URL: 'http://payments.invalid/charges' });
      // The runtime's default logger writes `bullmq-idempotency warn: …` lines; the first about a failure is the first attempt's.
      const first = r.stderr.split('\n').find((l) => /^bullmq-idempotency (warn|error):.*fail/i.test(l)) ?? '';
      expect(first, r.stderr).toMatch(/ENOTFOUND|fetch failed/);
    },
    PROGRAM_TIMEOUT_MS + 30_000,
  );
});
