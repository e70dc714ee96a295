/**
 * The README's front door cannot drift: its TypeScript blocks, read in order as one module,
 * type-check against the library, and the same module RUNS against Postgres and Redis: the
 * tour's charge is committed once and unsealed exactly, a repeated enqueue is absorbed, and the
 * audit block's task ends up in its timeline, the observed worker's claim is counted and its spans
 * nest under BullMQ's job span. The tour runs as written, in a database of its own
 * and a Redis database of its own (leased, so parallel runs never share one); its payments API
 * is served locally (test/helpers/payments-api.ts).
 */
import { randomBytes } from 'node:crypto';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import pg from 'pg';
import ts from 'typescript';
import { describe, expect, inject, it } from 'vitest';
import { childEnv, runTs } from './helpers/spawn.js';

const root = fileURLToPath(new URL('..', import.meta.url));

/** The README's TypeScript blocks in order, importing the library from the sources. */
function tourSource(): string {
  const readme = readFileSync(`${root}README.md`, 'utf8');
  const blocks = [...readme.matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1] as string);
  expect(blocks.length).toBeGreaterThanOrEqual(2);
  return blocks.map(fromSources).join('\n');
}

/** A block's imports of the package and its subpaths, pointed at their entries in the sources. */
function fromSources(block: string): string {
  return block.replace(/from 'bullmq-idempotency(?:\/([a-z]+))?'/g, (_all, sub: string | undefined) =>
    sub === undefined
      ? "from '../src/index.js'"
      : sub === 'testing'
        ? "from '../src/testing/index.js'"
        : `from '../src/entries/${sub}.js'`,
  );
}

/** Appended to the tour when it runs: what it did, as one JSON line, read from its own variables. */
const EPILOGUE = `
// --- test/readme.test.ts: what the tour did
const __again = await chargeOrder.enqueue(queue, { orderId: 'o-42', amount: 1200 });
const __record = await ledger.get(idempotencyKey);
let __task = await timeline({ taskId: 'task-42' }, { store: new AuditStore(ledger.pool), ledger });
for (const end = Date.now() + 90_000; Date.now() < end; await new Promise((r) => setTimeout(r, 100))) {
  __task = await timeline({ taskId: 'task-42' }, { store: new AuditStore(ledger.pool), ledger });
  if (__task.events.some((e) => e.action === 'idempotency.completed')) break;
}
console.log('TOUR ' + JSON.stringify({
  receipt,
  charges: __payments.charges,
  again: { added: __again.added, state: __again.state },
  status: __record?.status,
  task: __task.events.map((e) => [e.action, e.decision]),
  storyEnded: story.attempts.some((a) => a.end !== undefined),
  claims: (await workerMetrics.registry.metrics()).split('\\n').filter((l) => l.startsWith('bullmq_idempotency_claims_total')),
  spans: __spans(),
}));
process.exit(0);
`;

/**
 * Before the tour: its payments API, and what an application's OpenTelemetry SDK would set up (a
 * global tracer provider and context manager), exporting to memory so the spans can be read.
 */
const PRELUDE = `import { servePaymentsExample } from './helpers/payments-api.js';
import { context as __otelContext, trace as __otelTrace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager as __Contexts } from '@opentelemetry/context-async-hooks';
import { BasicTracerProvider as __Provider, InMemorySpanExporter as __Exporter, SimpleSpanProcessor as __Processor } from '@opentelemetry/sdk-trace-base';
const __payments = await servePaymentsExample();
const __exporter = new __Exporter();
__otelContext.setGlobalContextManager(new __Contexts().enable());
__otelTrace.setGlobalTracerProvider(new __Provider({ spanProcessors: [new __Processor(__exporter)] }));
/** The library's finished spans: name, parent span's name, operation. */
const __spans = () => {
  const all = __exporter.getFinishedSpans();
  const byId = new Map(all.map((s) => [s.spanContext().spanId, s]));
  return all.filter((s) => s.name.startsWith('idempotency.')).map((s) =>
    [s.name, byId.get(s.parentSpanContext?.spanId ?? '')?.name ?? null, s.attributes['idempotency.operation']]);
};
`;

function withScratchFile<T>(source: string, fn: (file: string) => Promise<T>): Promise<T> {
  const file = `${root}test/.readme-${randomBytes(4).toString('hex')}.ts`;
  writeFileSync(file, source);
  return fn(file).finally(() => rmSync(file, { force: true }));
}

/** A Redis database (1-15) of this run alone, leased through a key in database 0; emptied before and after. */
async function withRedisDatabase<T>(url: string, fn: (dbUrl: string) => Promise<T>): Promise<T> {
  const lock = new Redis(url);
  const token = randomBytes(8).toString('hex');
  try {
    let db = 0;
    for (const end = Date.now() + 120_000; db === 0 && Date.now() < end; ) {
      for (let n = 1; n <= 15 && db === 0; n++) {
        if ((await lock.set(`bqi-readme-tour:db:${n}`, token, 'PX', 300_000, 'NX')) === 'OK') db = n;
      }
      if (db === 0) await new Promise((r) => setTimeout(r, 500));
    }
    if (db === 0) throw new Error('no Redis database 1-15 was free for the tour');
    const dbUrl = new URL(url);
    dbUrl.pathname = `/${db}`;
    const empty = async () => {
      const r = new Redis(dbUrl.toString());
      try {
        let cursor = '0';
        do {
          const [next, keys] = await r.scan(cursor, 'COUNT', 1000);
          cursor = next;
          if (keys.length > 0) await r.del(...keys);
        } while (cursor !== '0');
      } finally {
        await r.quit();
      }
    };
    await empty();
    try {
      return await fn(dbUrl.toString());
    } finally {
      await empty();
      if ((await lock.get(`bqi-readme-tour:db:${db}`)) === token) await lock.del(`bqi-readme-tour:db:${db}`);
    }
  } finally {
    await lock.quit();
  }
}

/** A fresh Postgres database for this run (the tour migrates `public`), dropped afterwards. */
async function withDatabase<T>(url: string, fn: (dbUrl: string) => Promise<T>): Promise<T> {
  const name = `bqi_tour_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  try {
    await admin.query(`create database ${name}`);
    const dbUrl = new URL(url);
    dbUrl.pathname = `/${name}`;
    try {
      return await fn(dbUrl.toString());
    } finally {
      await admin.query(`drop database if exists ${name} with (force)`);
    }
  } finally {
    await admin.end();
  }
}

describe('README', () => {
  it("the tour's TypeScript snippets, read in order as one module, type-check against the library", async () => {
    await withScratchFile(`${tourSource()}\nexport {};\n`, async (file) => {
      const config = ts.readConfigFile(`${root}tsconfig.json`, ts.sys.readFile);
      const parsed = ts.parseJsonConfigFileContent(config.config, ts.sys, root);
      const program = ts.createProgram([file], { ...parsed.options, noEmit: true });
      const diagnostics = ts
        .getPreEmitDiagnostics(program)
        .filter((d) => d.file?.fileName === file)
        .map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n'));
      expect(diagnostics).toEqual([]);
    });
  }, 180_000);

  it("the tour runs as written: one charge, unsealed exactly; a repeat absorbed; the audit block's task in its timeline; the observed worker's metrics and spans", async () => {
    const run = await withDatabase(inject('databaseUrl'), (databaseUrl) =>
      withRedisDatabase(inject('redisUrl'), (redisUrl) =>
        withScratchFile(`${PRELUDE}${tourSource()}${EPILOGUE}\nexport {};\n`, (file) =>
          runTs(
            file,
            [],
            childEnv({
              DATABASE_URL: databaseUrl,
              REDIS_URL: redisUrl,
              BQI_KEY_K1: `base64:${randomBytes(32).toString('base64')}`,
            }),
            180_000,
          ),
        ),
      ),
    );
    expect(run.code, run.stderr).toBe(0);
    const line = run.stdout.split('\n').find((l) => l.startsWith('TOUR '));
    expect(line, run.stdout + run.stderr).toBeDefined();
    const facts = JSON.parse((line as string).slice('TOUR '.length));
    expect(facts.charges).toHaveLength(1); // committed once downstream
    expect(facts.receipt).toBe(facts.charges[0].receipt); // unseal gave back exactly what was returned
    expect(facts.again).toEqual({ added: false, state: 'completed' });
    expect(facts.status).toBe('completed');
    expect(facts.task).toContainEqual(['tool.send_email', 'allow']);
    expect(facts.task).toContainEqual(['idempotency.completed', 'allow']);
    // The tour's own wait: the story it prints has the attempt's end, not an empty timeline.
    expect(facts.storyEnded).toBe(true);
    // The observed worker: one claim acquired, and its phases' spans under BullMQ's job span.
    expect(facts.claims).toContain('bullmq_idempotency_claims_total{operation="mail.send",outcome="acquired"} 1');
    expect(facts.spans).toEqual(
      expect.arrayContaining([
        ['idempotency.claim', 'process digests', 'mail.send'],
        ['idempotency.run', 'process digests', 'mail.send'],
        ['idempotency.complete', 'process digests', 'mail.send'],
      ]),
    );
    expect(facts.spans).toHaveLength(3);
  }, 240_000);
});
