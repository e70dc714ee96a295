/**
 * `npm run bench:audit`: the audit trail's costs, in one sitting.
 * - redaction: ~1 KB nested events per second on one core (bench/redaction.ts, in its own process);
 * - pipeline: emitter → BullMQ audit queue → writer → Postgres, sustained events/s (the median
 *   of three bursts of 100,000 events, with each burst's CPU split printed to stderr) and the lag
 *   from an event's creation to its row (p50/p99, database clock);
 * - wrapper overhead: withIdempotency's fresh path with the audit trail on versus off, alternating
 *   rounds; overhead = 1 − on/off, the median of the rounds' own ratios (and, as printed before,
 *   1 − median(on)/median(off)), with this process's CPU per job in each mode. It is what the worker
 *   pays (build, redact, validate, batch and enqueue three events per job); the writer's work is the
 *   pipeline figure. A third mode in the same rounds, the transport floor
 *   (bench/lib/audit-transport-floor.ts: the events made, batched, deflated and queued as the
 *   emitter does, with no redaction or check), gives `1 − floor/off`: what this design's transport
 *   costs before redaction; a fourth, the guarded transport floor (the same, each event redacted by
 *   the emitter's redactor first, and nothing else: no check, no limits, no outbox), gives
 *   `1 − guarded/off`: what any emitter that redacts on the worker's side costs at least.
 * - verify: the hash chains the pipeline wrote, walked whole (events/s).
 * Timings on a shared 2-core machine are noisy: figures are reported, never asserted. The last line
 * of stdout is one JSON object. Env: BENCH_AUDIT_EVENTS, BENCH_AUDIT_BURSTS, BENCH_JOBS and
 * BENCH_ROUNDS (the wrapper rounds), BENCH_CPU_PROFILE=dir (profiles the writer process),
 * BENCH_AUDIT_ONLY=pipeline (the pipeline alone: no redaction figure, no wrapper rounds),
 * BENCH_AUDIT_CHAIN=off (the writer stores events without the hash chain, bench/lib/unchained-store.ts,
 * to measure what the chain costs: alternate runs with and without it; verify is then skipped),
 * BENCH_AUDIT_TAG=off (the emitters' batches carry no tag, so the writer redacts every event
 * again: src/audit/batch-tag.ts; the writer holds the bench's rules, `BQI_REDACTION`),
 * BENCH_AUDIT_WRITER_RULES=builtin (the writer holds the built-in rules, not the bench's),
 * BENCH_AUDIT_PIPELINE=floor with BENCH_AUDIT_ONLY=pipeline (the pipeline's floor: the transport
 * floor's emitter and a writer storing rows and one row per event id, nothing else; see
 * PIPELINE_FLOOR), BENCH_AUDIT_PIPELINE=guarded (the same floor with each event redacted by the
 * emitter's redactor inside the timed burst: PIPELINE_GUARDED), or BENCH_AUDIT_PIPELINE=chained
 * (the guarded floor's emitter, and a writer that stores each batch with the library's hash chain
 * and nothing else: PIPELINE_CHAINED).
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { Queue, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import pg from 'pg';
import { z } from 'zod';
import { type AuditEvent, eventIdFor } from '../src/audit/audit-event.js';
import { decodeAuditBatch } from '../src/audit/batch-codec.js';
import { AuditEmitter, type AuditRedactor } from '../src/audit/emitter.js';
import { auditRedactor } from '../src/audit/redact-event.js';
import { verifyAuditChains } from '../src/audit/verify-chain.js';
import { migrate, PostgresLedger } from '../src/entries/ledger.js';
import { defineKeyring, defineOperation, withIdempotency } from '../src/index.js';
import { benchToolEvent } from '../test/helpers/audit-sample.js';
import { AuditTransportFloor } from './lib/audit-transport-floor.js';
import { BENCH_REDACTION_FILE, benchPolicy } from './lib/bench-policy.js';
import { jsonLine } from './lib/json-line.js';
import { storedBytes } from './lib/pg-size.js';
import { walPosition, walSince } from './lib/pg-wal.js';
import { type CpuSnapshot, cpuSnapshot, cpuSplit } from './lib/proc-cpu.js';
import { median, perRoundRatios } from './lib/stats.js';
import { printTable } from './lib/table.js';

const databaseUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const PIPELINE_EVENTS = Number(process.env.BENCH_AUDIT_EVENTS ?? 100_000);
const PIPELINE_BURSTS = Number(process.env.BENCH_AUDIT_BURSTS ?? 3);
const WRAPPER_JOBS = Number(process.env.BENCH_JOBS ?? 10_000);
/** The pipeline alone (`BENCH_AUDIT_ONLY=pipeline`): for comparing two versions of the writer or the store. */
const PIPELINE_ONLY = process.env.BENCH_AUDIT_ONLY === 'pipeline';
const ROUNDS = PIPELINE_ONLY ? 0 : Number(process.env.BENCH_ROUNDS ?? 3);
/** The producer waits while the emitter holds more than this many events (its bound here: 50,000). */
const PACE_BUFFERED = 5_000;
/** When set, the writer process is CPU-profiled into this directory (`bench/profile-summary.ts` reads it). */
const PROFILE_DIR = process.env.BENCH_CPU_PROFILE;
/** `BENCH_AUDIT_CHAIN=off`: the writer stores events without the hash chain (bench/lib/unchained-store.ts). */
const CHAINED = process.env.BENCH_AUDIT_CHAIN !== 'off';
/**
 * `BENCH_AUDIT_PIPELINE=guarded`: the guarded pipeline floor. As the floor, but the events are made
 * and redacted by the emitter's redactor as they are emitted, inside the timed burst, as any
 * emitter that redacts on the worker's side must: the most a pipeline with redaction can carry on
 * this design, before any check, limit, outbox or chain.
 */
/**
 * `BENCH_AUDIT_PIPELINE=chained`: the chained guarded floor. The guarded floor's emitter, and a
 * writer that stores each batch as the library does, with the hash chain and the receipts
 * (bench/lib/chained-floor-store.ts), and nothing else: no check, no second redaction, no tag.
 * The least a pipeline that redacts on the worker's side and keeps a tamper-evident trail costs.
 */
const PIPELINE_CHAINED = process.env.BENCH_AUDIT_PIPELINE === 'chained';
const PIPELINE_GUARDED = process.env.BENCH_AUDIT_PIPELINE === 'guarded' || PIPELINE_CHAINED;
/**
 * `BENCH_AUDIT_PIPELINE=floor` (with `BENCH_AUDIT_ONLY=pipeline`): the pipeline's floor. The events,
 * redacted before each burst is timed, are written, batched, deflated and queued with no check
 * (bench/lib/audit-transport-floor.ts); the writer decodes each batch and stores it with the
 * fresh floor's statement, the rows and one row per event id taken to be new, nothing else
 * (bench/lib/floor-store.ts). Alternate runs with and without it.
 */
const PIPELINE_FLOOR = process.env.BENCH_AUDIT_PIPELINE === 'floor' || PIPELINE_GUARDED;
if (PIPELINE_FLOOR && !PIPELINE_ONLY)
  throw new Error('BENCH_AUDIT_PIPELINE=floor or guarded runs with BENCH_AUDIT_ONLY=pipeline');
const CHAIN_WRITTEN = CHAINED && (!PIPELINE_FLOOR || PIPELINE_CHAINED);
const id = randomBytes(3).toString('hex');
const schema = `bench_audit_${id}`;
const prefix = `{bench-audit-${id}}`;
const connection = { url: redisUrl, maxRetriesPerRequest: null };
/** Tables stored with each event besides audit_events itself: the event-id table (migrations/0006). */
const AUDIT_SIDE_TABLES = ['audit_event_ids'];
const log = (s: string) => process.stderr.write(`${s}\n`);
/** The Postgres sessions of this run (the writer's and this process's): their backends' CPU is the Postgres figure. */
const APP_NAME = `bench-audit-${id}`;

/**
 * CPU seconds between two snapshots of the processes `pids` (a process born meanwhile counts from
 * zero). On a machine shared with other work, only this run's own processes are counted: the
 * writer by its pid, Postgres by the backends of this run's sessions.
 */
function cpuOf(before: CpuSnapshot | undefined, after: CpuSnapshot | undefined, pids: Iterable<number>): number {
  if (!before || !after) return Number.NaN;
  let ticks = 0;
  for (const pid of pids) {
    const now = after.procs.get(pid);
    if (now) ticks += now.ticks - (before.procs.get(pid)?.ticks ?? 0);
  }
  return ticks / 100;
}

async function backendPids(pool: pg.Pool): Promise<number[]> {
  return (await pool.query('select pid from pg_stat_activity where application_name = $1', [APP_NAME])).rows.map((r) =>
    Number(r.pid),
  );
}

/** The keyring of the bench's emitters and of its writer process (`BQI_KEYRING`). */
const keyringSecret = randomBytes(32);
const policy = benchPolicy(defineKeyring({ keys: [{ id: 'k1', secret: keyringSecret }] }));
/**
 * `BENCH_AUDIT_TAG=off`: the emitters redact through a function of the bench's own (the same
 * redaction), so their batches carry no tag and the writer redacts every event again, as it does
 * for any untagged batch (src/audit/batch-tag.ts).
 */
const TAGGED = process.env.BENCH_AUDIT_TAG !== 'off';
/**
 * `BENCH_AUDIT_WRITER_RULES=builtin`: the writer process is not given the bench's rules
 * (`BQI_REDACTION`) and holds the built-in ones, as an operations process beside workers with
 * rules of their own did before it could load them: the tags do not hold, every event is redacted again.
 */
const WRITER_BUILTIN = process.env.BENCH_AUDIT_WRITER_RULES === 'builtin';
const redactor = auditRedactor(policy);
const emitterRedact: AuditRedactor = TAGGED ? redactor : (e) => redactor(e);

function redactionPerSecond(): number {
  const out = execFileSync(
    process.execPath,
    ['--import', 'tsx', fileURLToPath(new URL('./redaction.ts', import.meta.url))],
    {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  const last = out.trim().split('\n').pop() as string;
  return (JSON.parse(last) as { redaction_per_s: number }).redaction_per_s;
}

function toolEvent(i: number): AuditEvent {
  return benchToolEvent(eventIdFor('bench', id, i), `task-${i % 1000}`, i);
}

/** The batches the writer process stored: without its second redaction pass (tag held), or with it. */
const writerBatches = { held: 0, redacted: 0 };

/** The operations process (`npm start`), as deployed: the writer runs beside the emitting worker. */
async function startWriterProcess(): Promise<ChildProcess> {
  const child = spawn(
    process.execPath,
    [
      ...(PROFILE_DIR ? ['--cpu-prof', `--cpu-prof-dir=${PROFILE_DIR}`] : []),
      '--import',
      'tsx',
      ...(CHAINED ? [] : ['--import', fileURLToPath(new URL('./lib/unchained-store.ts', import.meta.url))]),
      ...(PIPELINE_FLOOR
        ? [
            '--import',
            fileURLToPath(
              new URL(PIPELINE_CHAINED ? './lib/chained-floor-store.ts' : './lib/floor-store.ts', import.meta.url),
            ),
          ]
        : []),
      fileURLToPath(new URL('../jobs/main.ts', import.meta.url)),
    ],
    {
      env: {
        ...process.env,
        // Names its Postgres sessions, so that their CPU is told from other clients' (cpuOf).
        DATABASE_URL: `${databaseUrl}${databaseUrl.includes('?') ? '&' : '?'}application_name=${APP_NAME}`,
        REDIS_URL: redisUrl,
        BQI_SCHEMA: schema,
        BQI_PREFIX: prefix,
        BQI_AUDIT_QUEUE: 'audit',
        LOG_LEVEL: 'info',
        BQI_KEYRING: `k1:base64:${keyringSecret.toString('base64')}`,
        ...(WRITER_BUILTIN ? {} : { BQI_REDACTION: fileURLToPath(BENCH_REDACTION_FILE) }),
      },
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  await new Promise<void>((resolve, reject) => {
    createInterface({ input: child.stdout! }).on('line', (l) => {
      if (l.includes('"started"')) resolve();
      else if (l.includes('"audit batch written"')) writerBatches[JSON.parse(l).tagHeld ? 'held' : 'redacted']++;
    });
    child.once('exit', (code) => reject(new Error(`writer process exited with ${code}`)));
  });
  return child;
}

/** What the pipeline emits through: the emitter, or the transport floor (`BENCH_AUDIT_PIPELINE=floor`). */
type PipelineEmitter = AuditEmitter | AuditTransportFloor;

/**
 * The events `emitAll` emits from `from`: made as it goes (the guarded floor's are redacted as
 * they are taken), or, for the floor, made and redacted now (before the burst is timed) and given
 * their time as they go.
 */
function eventsFrom(from: number, count: number): (i: number) => AuditEvent {
  if (!PIPELINE_FLOOR || PIPELINE_GUARDED) return toolEvent;
  const ready = Array.from({ length: count }, (_, i) => redactor(toolEvent(from + i)));
  // Its time is the time it is emitted, as the emitter's events' is (the lag counts from it).
  return (i) => ({ ...(ready[i - from] as AuditEvent), createdAt: new Date().toISOString() });
}

async function emitAll(
  emitter: PipelineEmitter,
  from: number,
  count: number,
  eventOf: (i: number) => AuditEvent,
  perSecond?: number,
): Promise<void> {
  const began = performance.now();
  for (let i = 0; i < count; i++) {
    emitter.record(eventOf(from + i));
    if (i % 1000 === 999) {
      // Keep the producer well within the emitter's memory bound (past it, events would go to the
      // outbox), as a worker's own pace would, without stopping it while batches are on their way.
      while (emitter.buffered > PACE_BUFFERED) await new Promise((r) => setTimeout(r, 1));
      if (perSecond) {
        const ahead = ((i + 1) / perSecond) * 1000 - (performance.now() - began);
        if (ahead > 0) await new Promise((r) => setTimeout(r, ahead));
      }
    }
  }
  await emitter.flush();
}

/**
 * Waits until the writer has taken every batch off the queue, then checks the row count once.
 * (Polling `count(*)` instead would scan the growing table every few milliseconds and bill the
 * pipeline for its own measurement.)
 */
async function waitForRows(pool: pg.Pool, queue: Queue, n: number): Promise<void> {
  for (;;) {
    const c = await queue.getJobCounts('waiting', 'active', 'delayed', 'prioritized', 'failed');
    if (c.failed) throw new Error(`${c.failed} audit batches failed`);
    if (!c.waiting && !c.active && !c.delayed && !c.prioritized) {
      const have = Number((await pool.query(`select count(*) from ${schema}.audit_events`)).rows[0].count);
      if (have >= n) return;
    }
    await new Promise((r) => setTimeout(r, 10));
  }
}

/**
 * Sustained rate: bursts of events from this process, written by the operations process; the
 * median of PIPELINE_BURSTS bursts. Lag: then a paced stream at half that rate, creation (worker
 * clock) to row (database clock).
 */
async function pipeline(
  pool: pg.Pool,
  writerPid: number,
): Promise<{
  perSecond: number;
  bursts: number[];
  p50: number;
  p99: number;
  bytesPerEvent: number;
  storage: string;
  /** WAL bytes per event over the bursts. */
  walPerEvent: number;
  /** The emitter's, the writer's and Postgres's CPU µs per event, each the median of the bursts'. */
  cpu: { emitter: number; writer: number; postgres: number };
}> {
  const queue = new Queue('audit', { connection, prefix });
  const emitter: PipelineEmitter = PIPELINE_FLOOR
    ? new AuditTransportFloor(queue, undefined, PIPELINE_GUARDED ? redactor : undefined)
    : new AuditEmitter({
        queue,
        pool,
        schema,
        redact: emitterRedact,
        maxBatch: 500,
        maxBuffered: 50_000,
      });
  try {
    const bursts: number[] = [];
    const cpuUs = { emitter: [] as number[], writer: [] as number[], postgres: [] as number[] };
    const walBefore = await walPosition(pool);
    for (let b = 0; b < PIPELINE_BURSTS; b++) {
      const eventOf = eventsFrom(b * PIPELINE_EVENTS, PIPELINE_EVENTS);
      const started = performance.now();
      const pgBefore = await backendPids(pool);
      const cpuBefore = cpuSnapshot();
      await emitAll(emitter, b * PIPELINE_EVENTS, PIPELINE_EVENTS, eventOf);
      await waitForRows(pool, queue, (b + 1) * PIPELINE_EVENTS);
      bursts.push(PIPELINE_EVENTS / ((performance.now() - started) / 1000));
      const cpuAfter = cpuSnapshot();
      const cpu = cpuSplit(cpuBefore, cpuAfter);
      if (cpu) {
        const per1000 = (x: number) => ((x / PIPELINE_EVENTS) * 1000).toFixed(3);
        const writer = cpuOf(cpuBefore, cpuAfter, [writerPid]);
        const postgres = cpuOf(cpuBefore, cpuAfter, new Set([...pgBefore, ...(await backendPids(pool))]));
        const us = (x: number) => (x / PIPELINE_EVENTS) * 1e6;
        cpuUs.emitter.push(us(cpu.node));
        cpuUs.writer.push(us(writer));
        cpuUs.postgres.push(us(postgres));
        log(
          `burst ${b + 1}: ${Math.round(bursts[b] as number)} events/s; CPU s per 1000 events: emitter ${per1000(cpu.node)}, writer ${per1000(writer)}, postgres ${per1000(postgres)} (all backends ${per1000(cpu.postgres)}), redis ${per1000(cpu.redis)}, idle ${per1000(cpu.idle)}`,
        );
      }
    }
    const perSecond = median(bursts);
    const walPerEvent = (await walSince(pool, walBefore)) / (PIPELINE_BURSTS * PIPELINE_EVENTS);
    const from = PIPELINE_BURSTS * PIPELINE_EVENTS;
    const paced = Math.min(20_000, Math.round(perSecond / 2) * 2);
    await emitAll(emitter, from, paced, eventsFrom(from, paced), perSecond / 2);
    await waitForRows(pool, queue, from + paced);
    const lag = await pool.query(
      `select percentile_cont(0.5) within group (order by ms) as p50, percentile_cont(0.99) within group (order by ms) as p99
       from (select extract(epoch from (received_at - created_at)) * 1000 as ms from ${schema}.audit_events
             where seq >= $1) x`,
      [from],
    );
    if (
      emitter instanceof AuditEmitter &&
      emitter.metrics.outboxed + emitter.metrics.dropped + emitter.metrics.invalid > 0
    ) {
      throw new Error(`pipeline lost its way: ${JSON.stringify(emitter.metrics)}`);
    }
    const stored = await storedBytes(pool, schema, ['audit_events', ...AUDIT_SIDE_TABLES]);
    const rows = from + paced;
    return {
      perSecond,
      bursts,
      p50: Number(lag.rows[0].p50),
      p99: Number(lag.rows[0].p99),
      bytesPerEvent: stored.total / rows,
      storage: stored.parts.map(([name, bytes]) => `${name} ${Math.round(bytes / rows)}`).join(', '),
      walPerEvent,
      cpu: { emitter: median(cpuUs.emitter), writer: median(cpuUs.writer), postgres: median(cpuUs.postgres) },
    };
  } finally {
    await emitter.close();
    await queue.close();
  }
}

/** A wrapper round's jobs/s, and this process's CPU per job (µs: the worker's own, audit on or off). */
type RoundResult = { perSecond: number; cpuUsPerJob: number };

/** A wrapper round's audit trail: none, the emitter (redaction and checks), the transport floor alone, or with redaction. */
type AuditMode = 'off' | 'on' | 'floor' | 'guarded';

async function wrapperRound(
  ledger: PostgresLedger,
  pool: pg.Pool,
  mode: AuditMode,
  round: number,
): Promise<RoundResult> {
  const name = `w-${mode}-${round}`;
  const op = defineOperation({
    name: 'search.run',
    namespace: `bench/${name}`,
    version: 'v1',
    input: z.object({ q: z.number() }),
    effect: (i) => i,
    resourceKey: (i) => `q:${i.q}`,
    retention: '1h',
    lease: '10s',
    downstream: 'idempotent',
  });
  const queue = new Queue(name, { connection, prefix });
  for (let i = 0; i < WRAPPER_JOBS; i += 1000) {
    await queue.addBulk(
      Array.from({ length: Math.min(1000, WRAPPER_JOBS - i) }, (_, j) => ({
        name: 'q',
        data: { q: i + j },
        opts: { removeOnComplete: true, removeOnFail: true },
      })),
    );
  }
  // The worker's side only: events go to a queue no writer consumes during the round (the
  // writer's own cost is the pipeline figure above); they are counted afterwards.
  const auditQueue = new Queue(`audit-${name}`, { connection, prefix });
  const emitter =
    mode === 'on'
      ? new AuditEmitter({ queue: auditQueue, pool, schema, redact: emitterRedact })
      : mode === 'floor'
        ? new AuditTransportFloor(auditQueue)
        : mode === 'guarded'
          ? new AuditTransportFloor(auditQueue, undefined, emitterRedact)
          : undefined;
  let effects = 0;
  let done = 0;
  const started = performance.now();
  const cpuBefore = process.cpuUsage();
  const finished = new Promise<void>((resolve) => {
    const worker = new Worker(
      name,
      withIdempotency(
        op,
        async (input, ctx) => {
          effects++;
          ctx.audit({ action: 'tool.search', decision: 'allow', details: { query: `q${input.q}`, results: 3 } });
          return { ok: true };
        },
        {
          ledger,
          keyring: defineKeyring({ keys: [{ id: 'bench', secret: randomBytes(32) }] }),
          ...(emitter ? { audit: emitter } : {}),
        },
      ),
      { connection, prefix, concurrency: 50 },
    );
    worker.on('completed', () => {
      if (++done === WRAPPER_JOBS) void worker.close().then(resolve);
    });
  });
  await finished;
  const seconds = (performance.now() - started) / 1000;
  const cpu = process.cpuUsage(cpuBefore);
  if (effects !== WRAPPER_JOBS) throw new Error(`side effect ran ${effects} times for ${WRAPPER_JOBS} jobs`);
  await emitter?.close();
  if (emitter) {
    let events = 0;
    for (const job of await auditQueue.getJobs(['wait', 'prioritized']))
      events += (await decodeAuditBatch(job.data)).events.length;
    // claimed, the tool decision and completed, per job: none lost on the way to the queue.
    const lost = emitter instanceof AuditEmitter ? emitter.metrics.outboxed + emitter.metrics.dropped : 0;
    if (events !== 3 * WRAPPER_JOBS || lost > 0) {
      const metrics = emitter instanceof AuditEmitter ? emitter.metrics : { enqueued: emitter.enqueued };
      throw new Error(`audit events: ${events} queued for ${WRAPPER_JOBS} jobs (${mode}: ${JSON.stringify(metrics)})`);
    }
  }
  await auditQueue.obliterate({ force: true });
  await auditQueue.close();
  await queue.obliterate({ force: true });
  await queue.close();
  return { perSecond: WRAPPER_JOBS / seconds, cpuUsPerJob: (cpu.user + cpu.system) / WRAPPER_JOBS };
}

await migrate({ connectionString: databaseUrl, schema });
const pool = new pg.Pool({ connectionString: databaseUrl, max: 10, application_name: APP_NAME });
const ledger = new PostgresLedger({ pool, schema });
let writer: ChildProcess | undefined;
try {
  if (!PIPELINE_ONLY) log('redaction (own process)...');
  const redaction = PIPELINE_ONLY ? Number.NaN : redactionPerSecond();
  log(`pipeline: ${PIPELINE_BURSTS} bursts of ${PIPELINE_EVENTS} events...`);
  writer = await startWriterProcess();
  const pipe = await pipeline(pool, writer.pid as number);
  // The hash chains the pipeline wrote, walked whole: every event's digest recomputed.
  const verifyStarted = performance.now();
  const verified = CHAIN_WRITTEN
    ? await verifyAuditChains(pool, schema)
    : { ok: true, events: Number.NaN, chains: 0, problems: [] };
  const verifySeconds = (performance.now() - verifyStarted) / 1000;
  if (!verified.ok) {
    // What the chains hold against their heads, read now (after the walk), to tell a broken chain
    // from rows that arrived while it was walked.
    const now = await pool.query(
      `select a.day::text, a.slot, a.seq as head, (select max(chain_seq) from ${schema}.audit_events e
         where e.chain_slot = a.slot and (e.created_at at time zone 'UTC')::date = a.day) as last,
         (select count(*) from ${schema}.audit_events) as events
       from ${schema}.audit_chains a order by a.day, a.slot`,
    );
    log(`chains now: ${JSON.stringify(now.rows)}; problems: ${JSON.stringify(verified.problems.slice(0, 5))}`);
    // Figures first (they do not depend on the walk), then the failure.
    process.exitCode = 1;
    log(`audit chains broken: ${JSON.stringify(verified.problems[0])}`);
  }
  // The pipeline leaves ~0.3 GB of WAL and dirty pages behind; flush them now rather than in a
  // checkpoint that would land in the middle of the wrapper rounds (needs superuser; best effort).
  await pool.query('checkpoint').catch(() => log('checkpoint refused (not a superuser): the rounds may overlap one'));
  const rounds: Record<AuditMode, RoundResult[]> = { off: [], on: [], floor: [], guarded: [] };
  const modes: AuditMode[] = ['off', 'on', 'floor', 'guarded'];
  for (let r = 0; r < ROUNDS; r++) {
    log(`wrapper round ${r + 1}/${ROUNDS}...`);
    // Each mode first, second, third and fourth in turn.
    for (let i = 0; i < modes.length; i++) {
      const mode = modes[(r + i) % modes.length] as AuditMode;
      rounds[mode].push(await wrapperRound(ledger, pool, mode, r));
    }
  }
  const on = rounds.on.map((x) => x.perSecond);
  const off = rounds.off.map((x) => x.perSecond);
  const floor = rounds.floor.map((x) => x.perSecond);
  // Each round ran its modes back to back: the median of the rounds' overheads, as the other
  // benches take per-round ratios (a round that a checkpoint or a neighbour slowed counts once).
  const overhead = 1 - median(perRoundRatios(on, off));
  const overheadOfMedians = 1 - median(on) / median(off);
  const floorOverhead = 1 - median(perRoundRatios(floor, off));
  const guarded = rounds.guarded.map((x) => x.perSecond);
  const guardedOverhead = 1 - median(perRoundRatios(guarded, off));
  const cpuOn = median(rounds.on.map((x) => x.cpuUsPerJob));
  const cpuOff = median(rounds.off.map((x) => x.cpuUsPerJob));
  const cpuFloor = median(rounds.floor.map((x) => x.cpuUsPerJob));
  const cpuGuarded = median(rounds.guarded.map((x) => x.cpuUsPerJob));
  const series = (xs: number[], m: number) => `${xs.map((x) => Math.round(x)).join(' / ')}  (median ${Math.round(m)})`;
  printTable(
    ['measure', 'value'],
    [
      ...(PIPELINE_ONLY ? [] : [['redaction, events/s (1 core)', String(Math.round(redaction))]]),
      ...(PIPELINE_FLOOR
        ? [
            [
              'pipeline',
              PIPELINE_CHAINED
                ? 'chained guarded floor: redacted, then transport floor → writer → the store with its hash chain'
                : `${PIPELINE_GUARDED ? 'guarded floor: redacted, then ' : 'floor: '}transport floor → writer → rows and one row per id`,
            ],
          ]
        : []),
      ['pipeline, events/s', series(pipe.bursts, pipe.perSecond)],
      ['pipeline lag p50 / p99, ms', `${pipe.p50.toFixed(0)} / ${pipe.p99.toFixed(0)}`],
      ['stored bytes per event', `${Math.round(pipe.bytesPerEvent)}  (${pipe.storage})`],
      ['WAL bytes per event', String(Math.round(pipe.walPerEvent))],
      [
        'verify, events/s',
        `${Math.round(verified.events / verifySeconds)}  (${verified.events} events, ${verified.chains} chains)`,
      ],
      [
        'CPU µs per event (median of bursts)',
        `emitter ${Math.round(pipe.cpu.emitter)}, writer ${Math.round(pipe.cpu.writer)}, postgres ${Math.round(pipe.cpu.postgres)}`,
      ],
      ...(PIPELINE_FLOOR
        ? []
        : [['writer batches, tag held / redacted again', `${writerBatches.held} / ${writerBatches.redacted}`]]),
      ...(PIPELINE_ONLY
        ? []
        : [
            ['wrapper audit off, jobs/s', series(off, median(off))],
            ['wrapper audit on, jobs/s', series(on, median(on))],
            [
              'wrapper overhead (median of rounds; of the medians)',
              `${overhead.toFixed(3)}; ${overheadOfMedians.toFixed(3)}`,
            ],
            ['wrapper, audit transport floor, jobs/s', series(floor, median(floor))],
            ['transport floor overhead (median of rounds)', floorOverhead.toFixed(3)],
            ['wrapper, guarded transport floor (redacted), jobs/s', series(guarded, median(guarded))],
            ['guarded transport floor overhead (median of rounds)', guardedOverhead.toFixed(3)],
            [
              'worker CPU µs per job, audit off / on / transport floor / guarded',
              `${Math.round(cpuOff)} / ${Math.round(cpuOn)} / ${Math.round(cpuFloor)} / ${Math.round(cpuGuarded)}`,
            ],
          ]),
    ],
  );
  jsonLine('audit', {
    chain: CHAIN_WRITTEN,
    pipeline: PIPELINE_CHAINED ? 'chained' : PIPELINE_GUARDED ? 'guarded' : PIPELINE_FLOOR ? 'floor' : 'library',
    tagged: TAGGED,
    writer_rules: WRITER_BUILTIN ? 'builtin' : 'bench',
    writer_batches_tag_held: PIPELINE_FLOOR ? null : writerBatches.held,
    writer_batches_redacted: PIPELINE_FLOOR ? null : writerBatches.redacted,
    redaction_per_s: PIPELINE_ONLY ? null : Math.round(redaction),
    pipeline_per_s: Math.round(pipe.perSecond),
    lag_p50_ms: Math.round(pipe.p50),
    lag_p99_ms: Math.round(pipe.p99),
    bytes_per_event: Math.round(pipe.bytesPerEvent),
    wal_per_event: Math.round(pipe.walPerEvent),
    verify_per_s: CHAIN_WRITTEN ? Math.round(verified.events / verifySeconds) : null,
    verify_ok: verified.ok,
    emitter_cpu_us_per_event: Math.round(pipe.cpu.emitter),
    writer_cpu_us_per_event: Math.round(pipe.cpu.writer),
    postgres_cpu_us_per_event: Math.round(pipe.cpu.postgres),
    wrapper_overhead: PIPELINE_ONLY ? null : Number(overhead.toFixed(3)),
    wrapper_overhead_of_medians: PIPELINE_ONLY ? null : Number(overheadOfMedians.toFixed(3)),
    worker_cpu_us_per_job_off: PIPELINE_ONLY ? null : Math.round(cpuOff),
    worker_cpu_us_per_job_on: PIPELINE_ONLY ? null : Math.round(cpuOn),
    transport_floor_overhead: PIPELINE_ONLY ? null : Number(floorOverhead.toFixed(3)),
    worker_cpu_us_per_job_floor: PIPELINE_ONLY ? null : Math.round(cpuFloor),
    guarded_floor_overhead: PIPELINE_ONLY ? null : Number(guardedOverhead.toFixed(3)),
    worker_cpu_us_per_job_guarded: PIPELINE_ONLY ? null : Math.round(cpuGuarded),
  });
} finally {
  if (writer) {
    writer.kill('SIGTERM');
    await new Promise((r) => writer?.once('exit', r));
  }
  await ledger.close();
  await pool.query(`drop schema if exists ${schema} cascade`);
  await pool.end();
  const redis = new Redis(redisUrl);
  const keys = await redis.keys(`${prefix}*`);
  if (keys.length) await redis.del(...keys);
  await redis.quit();
}
