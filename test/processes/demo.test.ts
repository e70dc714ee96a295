/**
 * `npm run demo -- --keep`, run as a user runs it: the facts it prints (commits per scenario, the
 * changed amount refused, the task's timeline, the backfill count, the unknown operation's
 * commands), then the CLI commands it names (docs/operations.md lists them all) against the data it kept, then `--clean`.
 */
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { promisify } from 'node:util';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { demoPlace, removeDemoData } from '../../scripts/demo-data.js';
import { chargeOperation, DEMO_TASK } from '../../scripts/demo-operation.js';
import { boundedKey } from '../../src/keys/idempotency-key.js';
import { childEnv, type Finished, ROOT, runTs } from '../helpers/spawn.js';

const execFileP = promisify(execFile);

const databaseUrl = inject('databaseUrl');
const redisUrl = inject('redisUrl');
const base = { DATABASE_URL: databaseUrl, REDIS_URL: redisUrl };
let demo: Finished;
let kept: Record<string, string> = {};
let id: string | undefined;

/** The kept run's variables, from the `export …` line the demo printed. */
function exported(stdout: string): Record<string, string> {
  const line = stdout.split('\n').find((l) => l.trim().startsWith('export '));
  if (!line) return {};
  return Object.fromEntries(
    [...line.matchAll(/(\w+)=('[^']*'|\S+)/g)].map((m) => [m[1] as string, (m[2] as string).replace(/^'|'$/g, '')]),
  );
}

const cli = (args: string[]) => runTs('src/cli/main.ts', args, childEnv({ ...base, ...kept }));
const rowOf = (scenario: string) => demo.stdout.split('\n').find((l) => l.startsWith(scenario)) ?? '';
/** The actions of a rendered timeline, in order. */
const actions = (text: string) => [...text.matchAll(/Z {2}((?:idempotency|tool)\.[a-z_]+)/g)].map((m) => m[1]);

beforeAll(async () => {
  demo = await runTs('scripts/demo.ts', ['--keep'], childEnv(base), 240_000);
  kept = exported(demo.stdout);
  id = /--clean ([0-9a-f]{6})/.exec(demo.stdout)?.[1];
}, 250_000);

afterAll(async () => {
  if (id) await removeDemoData(demoPlace(id), databaseUrl, redisUrl);
});

describe('npm run demo -- --keep', () => {
  it('exits 0 with one commit per intent in every scenario', () => {
    expect(demo.code, demo.stderr).toBe(0);
    const rows = demo.stdout.split('\n').filter((l) => /^\S.*\s{2}\d+\s+\d+\s{2}/.test(l));
    expect(rows).toHaveLength(9);
    for (const r of rows.filter((l) => !l.startsWith('intents recorded'))) expect(r).toMatch(/\s{2}1\s+1\s{2}/);
    // Three durable intents whose jobs Redis lost before a claim: the relay added them again, each ran once.
    expect(rowOf('intents recorded, then Redis lost their jobs')).toMatch(
      /\s{2}3\s+3\s{2}completed \(epoch 1\)\s+3 jobs deleted from Redis before a claim; 3 added again by the relay: 3× ok$/,
    );
    expect(demo.stdout).toContain('OK: 11 commits for 11 intents');
    expect(rowOf('duplicate adds')).toMatch(/completed \(epoch 1\)\s+5 adds → 4 jobs: 4× ok/);
    expect(rowOf('lost response, downstream has no idempotent API')).toMatch(/unknown \(epoch 1\)/);
    // The original always wins; the changed copy is refused before it runs.
    expect(rowOf('same key, changed amount')).toMatch(/original ok .*; changed failed: IDEMPOTENCY_CONFLICT$/);
    expect(rowOf('worker killed')).toMatch(/completed \(epoch 3\)/);
    expect(rowOf('sealed result')).toContain('unsealed = returned: true; token in Redis keys: 0, in the ledger: 0');
    // Charged once, and only after the operator's yes.
    expect(rowOf('large charge, approved by an operator')).toMatch(
      /completed \(epoch 2\)\s+ok \{"chargeId":"eff_8".*\}; 0 charges before cf-1 was approved by ops-alice$/,
    );
  });

  it("prints the large charge's trail: the request, the lease given back, the operator's yes, the completion", () => {
    expect(demo.stdout).toContain(
      [
        '  idempotency.claimed → confirmation.request (pending_confirmation)',
        '  → idempotency.released (CONFIRMATION_PENDING) → confirmation.answer (allow by user:ops-alice)',
        '  → idempotency.claimed → idempotency.completed',
      ].join('\n'),
    );
  });

  it("prints the task's timeline: claimed, a failed attempt, a takeover, the decisions, the completion, a replay", async () => {
    expect(actions(demo.stdout)).toEqual([
      'idempotency.claimed',
      'tool.charge_card',
      'idempotency.released',
      'idempotency.claimed',
      'tool.charge_card',
      'idempotency.takeover',
      'tool.charge_card',
      'idempotency.completed',
      'idempotency.replayed',
    ]);
    expect(demo.stdout).toMatch(/idempotency\.released\s+allow\s+DOWNSTREAM_UNAVAILABLE/);
    expect(demo.stdout).toContain('attempts: 3, takeovers: 1, replays: 1');
  });

  it('restores the deleted audit events with the backfill, and says how many', async () => {
    expect(demo.stdout).toMatch(/Audit backfill: 8 events deleted/);
    expect(demo.stdout).toMatch(/stored 8 of them again \(the deleted ids exactly\)/);
    // What it says is what the kept trail holds: the 8 rows the backfill wrote, and no event twice.
    const db = new pg.Client({ connectionString: databaseUrl });
    await db.connect();
    try {
      const schema = kept.BQI_SCHEMA as string;
      const { rows } = await db.query(
        `select count(*) filter (where actor_id = 'backfill')::int as restored,
                count(*)::int as n, count(distinct event_id)::int as ids
         from ${schema}.audit_events`,
      );
      expect(rows[0]).toMatchObject({ restored: 8 });
      expect(rows[0].n).toBe(rows[0].ids);
    } finally {
      await db.end();
    }
  });

  it("names the unknown operation's real key and the commands that settle it", () => {
    const op = chargeOperation('none');
    const key = boundedKey(op.keyFor(op.parseInput({ order: 'C-300', amount: 450 })));
    expect(demo.stdout).toContain(`npm run cli -- inspect '${key}'`);
    expect(demo.stdout).toContain(
      `npm run cli -- resolve '${key}' --committed --result '{"chargeId":"eff_3"}' --reason "found downstream"`,
    );
  });

  it('keeps its data: the export line reaches it, and the CLI commands it names run on it', async () => {
    expect(Object.keys(kept).sort()).toEqual(['BQI_KEYRING', 'BQI_PREFIX', 'BQI_SCHEMA']);
    const op = chargeOperation('none');
    const key = boundedKey(op.keyFor(op.parseInput({ order: 'C-300', amount: 450 })));
    const [stats, list, inspect, timeline, confirmations] = await Promise.all([
      cli(['stats']),
      cli(['list', '--status', 'unknown']),
      cli(['inspect', key]),
      cli(['timeline', DEMO_TASK]),
      cli(['confirmations', 'list']),
    ]);
    expect(stats.code, stats.stderr).toBe(0);
    expect(stats.stdout).toMatch(/completed\s+10/); // 7 scenarios, and the 3 relayed intents
    expect(stats.stdout).toMatch(/unknown\s+1/);
    expect(list.code, list.stderr).toBe(0);
    expect(list.stdout.split('\n').filter((l) => l.startsWith(key))).toHaveLength(1);
    expect(inspect.code, inspect.stderr).toBe(0);
    expect(inspect.stdout).toMatch(/status:\s+unknown \(epoch 1/);
    expect(timeline.code, timeline.stderr).toBe(0);
    // The CLI tells the same story the demo printed, line for line.
    expect(demo.stdout).toContain(timeline.stdout.trim());
    expect(actions(timeline.stdout)).toHaveLength(9);
    expect(confirmations.code, confirmations.stderr).toBe(0);
    expect(confirmations.stdout).toMatch(/^cf-1 {2}payments\.charge \/ large-charge {2}approved by user:ops-alice at /);
  });

  it('--clean removes what it kept', async () => {
    expect(id).toBeDefined();
    const clean = await runTs('scripts/demo.ts', ['--clean', id as string], childEnv(base), 60_000);
    expect(clean.code, clean.stderr).toBe(0);
    const db = new pg.Client({ connectionString: databaseUrl });
    await db.connect();
    try {
      const { rows } = await db.query('select count(*)::int as n from pg_namespace where nspname = $1', [
        kept.BQI_SCHEMA,
      ]);
      expect(rows[0].n).toBe(0);
    } finally {
      await db.end();
    }
    id = undefined;
  });
});

/**
 * What a run prints, comparable across runs: up to the part about its data (kept or removed),
 * timestamps blanked, and a timeline line reduced to its action (its layout is the timeline's).
 */
function comparable(text: string): string[] {
  const lines = text
    .replace(/\d{4}-\d\d-\d\dT[\d:.]+Z/g, '<time>')
    .trim()
    .split('\n');
  const end = lines.findIndex((l) => l.startsWith('The demo removed its data') || l.startsWith('Kept: '));
  return lines
    .slice(0, end < 0 ? lines.length : end)
    .map((l) => (l.startsWith('<time>') ? `<time> ${actions(l.replace('<time>', 'Z'))[0]}` : l.trimEnd()));
}

describe('README', () => {
  it('shows what the demo prints', async () => {
    const readme = readFileSync(`${ROOT}README.md`, 'utf8');
    // The block that opens with the table's header.
    const block = /\n```\n(scenario [\s\S]*?)\n```\n/.exec(readme)?.[1];
    expect(block).toBeDefined();
    expect(comparable(block as string)).toEqual(comparable(demo.stdout));
  });
});

describe('npm run migrate', () => {
  it('migrates the schema BQI_SCHEMA names', async () => {
    const schema = `t_migrate_script_${Date.now().toString(36)}`;
    const db = new pg.Client({ connectionString: databaseUrl });
    await db.connect();
    try {
      const run = await execFileP('npm', ['run', '-s', 'migrate'], {
        cwd: ROOT,
        env: childEnv({ ...base, BQI_SCHEMA: schema }),
      });
      expect(run.stdout).toContain(`in schema ${schema}`);
      const { rows } = await db.query(
        'select count(*)::int as n from information_schema.tables where table_schema = $1',
        [schema],
      );
      expect(rows[0].n).toBeGreaterThan(0);
    } finally {
      await db.query(`drop schema if exists ${schema} cascade`);
      await db.end();
    }
  });
});
