/**
 * The operator CLI, run as the real binary (the built src/cli/main.js, see helpers/spawn.ts) against
 * this file's schema and BullMQ prefix. Independent invocations run concurrently to keep the file fast.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AuditEvent } from '../../src/audit/audit-event.js';
import { AuditStore } from '../../src/audit/audit-store.js';
import { AUDIT_JOB_NAME } from '../../src/audit/batch-codec.js';
import { eventsForRecord } from '../../src/audit/derive.js';
import { auditEventFromWrapper } from '../../src/audit/from-wrapper.js';
import { createBackfillWorker } from '../../src/jobs/audit-backfill.js';
import { boundedKey, type IdempotencyKey } from '../../src/keys/idempotency-key.js';
import type { PostgresLedger } from '../../src/ledger/postgres-ledger.js';
import { jobIdFor } from '../../src/operation/enqueue.js';
import { ENVELOPE_FIELD } from '../../src/operation/envelope.js';
import { type SealedResult, unseal } from '../../src/sealing/sealed-result.js';
import { sampleAuditEvent } from '../helpers/audit-sample.js';
import { bull } from '../helpers/bullmq.js';
import { cliEnv } from '../helpers/cli-env.js';
import { unknownRecord } from '../helpers/cli-records.js';
import { TestContext, waitFor } from '../helpers/context.js';
import { TEST_KEYRING_SPEC, testKeyring } from '../helpers/keyring.js';
import { runTs } from '../helpers/spawn.js';

const t = new TestContext('cli');
const b = bull(t);
let ledger: PostgresLedger;

const env = (vars: Record<string, string | undefined> = {}) => cliEnv(t, vars);
const cli = (args: string[], vars?: Record<string, string | undefined>) => runTs('src/cli/main.ts', args, env(vars));

const keyOf = (resourceKey: string): IdempotencyKey => ({
  namespace: 'acme/assets.create',
  resourceKey,
  version: 'v1',
});

async function completed(
  resourceKey: string,
  result: unknown,
  extra: { taskId?: string; retentionMs?: number; owner?: string } = {},
) {
  const key = keyOf(resourceKey);
  const c = await ledger.claim({
    key,
    operation: 'assets.create',
    fingerprint: `fp-${resourceKey}`,
    leaseMs: 10_000,
    retentionMs: extra.retentionMs ?? 3_600_000,
    downstream: 'idempotent',
    jobId: jobIdFor(key),
    queue: 'assets',
    ...(extra.taskId ? { taskId: extra.taskId } : {}),
    ...(extra.owner ? { owner: extra.owner } : {}),
  });
  if (c.kind !== 'acquired') throw new Error(`seed ${resourceKey}: ${c.kind}`);
  await ledger.complete(key, c.epoch, result);
  return boundedKey(key);
}

const unknown = (resourceKey: string) => unknownRecord(ledger, keyOf(resourceKey), 'assets.create');

async function auditRows(where: string, values: unknown[] = []) {
  return (await t.query(`select * from ${t.schema}.audit_events where ${where}`, values)).rows;
}

/** `migrate` run by the CLI: it makes this file's tables, which every other test uses. */
let migrated: Awaited<ReturnType<typeof cli>>;

beforeAll(async () => {
  ledger = t.ledger();
  migrated = await cli(['migrate']);
});
afterAll(async () => {
  await ledger.close();
  await t.teardown();
});

describe('bullmq-idempotency CLI: migrate', () => {
  it('applies the migrations into BQI_SCHEMA and says so', async () => {
    expect(migrated.code, migrated.stderr).toBe(0);
    expect(migrated.stdout).toMatch(/^applied 0001-ledger, 0002-audit, 0003-audit-time-key(, [\w-]+)* in schema /);
    expect(migrated.stdout).toContain(`in schema ${t.schema}`);
    const tables = await t.query(
      "select count(*)::int as n from information_schema.tables where table_schema = $1 and table_name in ('idempotency_ledger','audit_events')",
      [t.schema],
    );
    expect(tables.rows[0]?.n).toBe(2);
  });
});

type Refusal = [what: string, code: number, args: string[], vars: Record<string, string | undefined>, stderr: string];

// Each invocation is its own process and touches nothing: they run concurrently.
describe.concurrent('bullmq-idempotency CLI: what it refuses, by exit code', () => {
  it.each<Refusal>([
    ['an unknown command', 2, ['bogus'], {}, "unknown command '<not echoed>'"],
    [
      'resolve with both --committed and --not-committed',
      2,
      ['resolve', 'a:b:c', '--committed', '--not-committed', '--reason', 'x'],
      {},
      'cannot be used with',
    ],
    ['resolve with neither outcome', 2, ['resolve', 'a:b:c', '--reason', 'x'], {}, '--not-committed'],
    [
      'resolve --result that is not JSON',
      2,
      ['resolve', 'a:b:c', '--committed', '--result', '{nope', '--reason', 'x'],
      {},
      'not JSON',
    ],
    ['invalidate without --reason', 2, ['invalidate', 'a:b:c'], {}, "required option '--reason <text>' not specified"],
    [
      'a malformed key',
      2,
      ['inspect', 'not-a-key'],
      {},
      'malformed key (9 characters, not echoed): expected namespace:resourceKey:version',
    ],
    [
      "a '#' outside a hashed key",
      2,
      ['invalidate', 'a:b#c', '--reason', 'x'],
      {},
      "malformed key (5 characters, not echoed): only a hashed bounded key has a '#'",
    ],
    ['no DATABASE_URL', 3, ['stats'], { DATABASE_URL: undefined }, 'IDEMPOTENCY_ENV_CONFIG: DATABASE_URL is required'],
    [
      'a DATABASE_URL that is not postgres://',
      3,
      ['stats'],
      { DATABASE_URL: 'mysql://localhost/x' },
      'IDEMPOTENCY_ENV_CONFIG: DATABASE_URL must be a postgres:// URL',
    ],
    [
      'an unmigrated schema',
      3,
      ['list', '--status', 'unknown'],
      { BQI_SCHEMA: `${t.schema}_none` },
      `IDEMPOTENCY_NOT_MIGRATED: schema ${t.schema}_none is not migrated (missing idempotency_ledger): run \`BQI_SCHEMA=${t.schema}_none npx bullmq-idempotency migrate\``,
    ],
    [
      'an unreachable Postgres',
      4,
      ['stats'],
      { DATABASE_URL: 'postgres://postgres@127.0.0.1:1/test' },
      'cannot reach Postgres at postgres://postgres@127.0.0.1:1/test',
    ],
  ])('%s: exit %i', async (_what, code, args, vars, stderr) => {
    const r = await cli(args, vars);
    expect(r.code, r.stderr).toBe(code);
    expect(r.stderr).toContain(stderr);
  });
});

describe.concurrent('bullmq-idempotency CLI: a refused value is not echoed', () => {
  // A secret pasted in the wrong place: what commander refuses it would quote back on stderr.
  const secret = `sk_live_${'9f3Kq'.repeat(8)}`;
  it.each<[what: string, args: string[], says: string]>([
    [
      'an --actor longer than 200 characters',
      ['invalidate', 'a:b:c', '--reason', 'x', '--actor', `${secret}${'x'.repeat(200)}`],
      "option '--actor <id>' argument '<not echoed>' is invalid",
    ],
    [
      'an --actor with a line break',
      ['invalidate', 'a:b:c', '--reason', 'x', '--actor', `ops\n${secret}`],
      "option '--actor <id>' argument '<not echoed>' is invalid",
    ],
    ['an unknown --flag=value', ['inspect', 'a:b:c', `--token=${secret}`], "unknown option '<not echoed>'"],
    ['an unknown command', [secret], "unknown command '<not echoed>'"],
    ['a --since that is not a date', ['backfill', '--since', secret], "option '--since <iso>' argument '<not echoed>'"],
    ['a malformed key', ['inspect', `acme:${secret}`], 'malformed key (53 characters, not echoed)'],
    ["a malformed key with a '#'", ['inspect', `acme:${secret}#x:v1`], 'malformed key (58 characters, not echoed)'],
    ['a malformed --operation key', ['timeline', '--operation', secret], 'malformed key (48 characters, not echoed)'],
  ])('%s: exit 2, the value not in the output', async (_what, args, says) => {
    const r = await cli(args);
    expect(r.code, r.stderr).toBe(2);
    expect(r.stderr).toContain(says);
    expect(`${r.stdout}${r.stderr}`).not.toContain(secret.slice(8, 30));
  });

  it.each<[what: string, args: string[], says: string]>([
    ['an unknown task id', ['timeline', secret], 'no audit events for the task id given (not echoed)'],
    [
      'an unknown job id',
      ['inspect', '--job', 'assets', secret],
      'no job with the id given (not echoed) in queue assets',
    ],
  ])('%s: exit 5, the value not in the output', async (_what, args, says) => {
    const r = await cli(args);
    expect(r.code, r.stderr).toBe(5);
    expect(r.stderr).toContain(says);
    expect(`${r.stdout}${r.stderr}`).not.toContain(secret.slice(8, 30));
  });
});

describe.concurrent('bullmq-idempotency CLI: help', () => {
  it('--help names every command, the exit codes and BQI_KEYRING', async () => {
    const help = await cli(['--help']);
    expect(help.code).toBe(0);
    for (const c of ['migrate', 'inspect', 'invalidate', 'list', 'resolve', 'timeline', 'backfill', 'sweep', 'stats']) {
      expect(help.stdout).toContain(c);
    }
    expect(help.stdout).toContain('Exit codes');
    expect(help.stdout).toContain('BQI_KEYRING');
  });

  it('resolve --help names --not-committed and what --committed needs', async () => {
    const resolveHelp = await cli(['resolve', '--help']);
    expect(resolveHelp.code).toBe(0);
    expect(resolveHelp.stdout).toContain('--not-committed');
    expect(resolveHelp.stdout).toContain('--committed needs BQI_KEYRING');
  });

  it('inspect --help names --decrypt and the audit event it writes', async () => {
    const inspectHelp = await cli(['inspect', '--help']);
    expect(inspectHelp.code).toBe(0);
    expect(inspectHelp.stdout).toContain('--decrypt');
    expect(inspectHelp.stdout).toContain('operator.decrypt audit event');
  });
});

describe('bullmq-idempotency CLI', () => {
  it('inspect shows a record (human, --json, --job); an unknown key exits 5', async () => {
    const key = await completed('inspect:1', { assetId: 'a1' }, { taskId: 'task-inspect', owner: 'worker-7' });
    const jobs = b.queue('assets');
    await jobs.add(
      'assets.create',
      { [ENVELOPE_FIELD]: { v: 1, operation: 'assets.create', key: keyOf('inspect:1') }, input: {} },
      { jobId: jobIdFor(keyOf('inspect:1')) },
    );
    const [human, json, byJob, missing, missingJob] = await Promise.all([
      cli(['inspect', key]),
      cli(['inspect', key, '--json']),
      cli(['inspect', '--job', 'assets', jobIdFor(keyOf('inspect:1')), '--json']),
      cli(['inspect', 'acme%2Fassets.create:nothing:v1']),
      cli(['inspect', '--job', 'assets', 'idem_missing']),
    ]);
    await jobs.close();
    expect(human.code, human.stderr).toBe(0);
    expect(human.stdout).toMatch(/^key:\s+acme%2Fassets\.create:inspect%3A1:v1$/m);
    expect(human.stdout).toMatch(/^status:\s+completed \(epoch 1, last transition completed\)$/m);
    expect(human.stdout).toMatch(/^result:\s+\{"assetId":"a1"\}$/m);
    expect(human.stdout).toMatch(/^task:\s+task-inspect$/m);
    // The worker that claimed it, though the lease (and its owner column) ended with the completion.
    expect(human.stdout).toMatch(/^claimed:\s+.+ by worker-7 \(claimed\)$/m);

    expect(json.code, json.stderr).toBe(0);
    expect(JSON.parse(json.stdout)).toMatchObject({
      key,
      status: 'completed',
      epoch: 1,
      result: { assetId: 'a1' },
      operation: 'assets.create',
      resourceKey: 'inspect:1',
    });

    expect(byJob.code, byJob.stderr).toBe(0);
    expect(JSON.parse(byJob.stdout)).toMatchObject({
      job: { queue: 'assets', id: jobIdFor(keyOf('inspect:1')), state: 'waiting' },
      record: { key, status: 'completed' },
    });

    expect(missing.code).toBe(5);
    expect(missing.stderr).toContain('no ledger record for key acme%2Fassets.create:nothing:v1');
    expect(missingJob.code).toBe(5);
    expect(missingJob.stderr).toContain('no job with the id given (not echoed) in queue assets');
    expect(missingJob.stderr).not.toContain('idem_missing');
  });

  it('invalidate and resolve change the ledger and write user audit events; illegal transitions exit 6', async () => {
    const toInvalidate = await completed('invalidate:1', 'sent', { taskId: 'task-ops' });
    const toResolve = await unknown('resolve:1');
    const settled = await completed('resolve:2', 'done');
    const [invalidated, resolved, refused, absent] = await Promise.all([
      cli([
        'invalidate',
        toInvalidate,
        '--reason',
        'customer jane@example.com asked for a resend',
        '--actor',
        'alice',
        '--json',
      ]),
      cli(
        ['resolve', toResolve, '--committed', '--result', '{"assetId":"a9"}', '--reason', 'found it in the provider'],
        { BQI_KEYRING: TEST_KEYRING_SPEC },
      ),
      cli(['resolve', settled, '--not-committed', '--reason', 'oops']),
      cli(['invalidate', 'acme%2Fassets.create:absent:v1', '--reason', 'x']),
    ]);

    expect(invalidated.code, invalidated.stderr).toBe(0);
    const out = JSON.parse(invalidated.stdout);
    expect(out).toMatchObject({ key: toInvalidate, previousStatus: 'completed', epoch: 2 });
    const row = await ledger.get(toInvalidate);
    expect(row).toMatchObject({ status: 'invalidated', epoch: 2, lastTransition: 'invalidated' });
    const [event] = await auditRows('event_id = $1', [out.auditEventId]);
    expect(event).toMatchObject({
      actor_type: 'user',
      actor_id: 'alice',
      action: 'idempotency.invalidated',
      resource_type: 'idempotency_key',
      resource_id: toInvalidate,
      task_id: 'task-ops',
      epoch: 2,
      reason_code: 'OPERATOR_INVALIDATED',
    });
    expect(event?.details.reason).toBe('customer j***@example.com asked for a resend');
    // Same id and time as the backfill derives from the row: a later backfill adds no duplicate.
    const derived = eventsForRecord(row!).at(-1);
    expect(derived?.eventId).toBe(out.auditEventId);
    expect(new Date(derived!.createdAt).getTime()).toBe((event!.created_at as Date).getTime());

    expect(resolved.code, resolved.stderr).toBe(0);
    expect(resolved.stdout).toContain('resolved acme%2Fassets.create:resolve%3A1:v1 as committed');
    expect(await ledger.get(toResolve)).toMatchObject({ status: 'completed', lastTransition: 'resolved_committed' });
    const replay = await ledger.claim({
      key: keyOf('resolve:1'),
      operation: 'assets.create',
      fingerprint: 'fp-resolve:1',
      leaseMs: 10_000,
      retentionMs: 3_600_000,
      downstream: 'none',
    });
    expect(replay.kind).toBe('completed');
    expect(unseal((replay as { result: SealedResult<unknown> }).result, testKeyring)).toEqual({ assetId: 'a9' });
    const resolvedEvents = await auditRows("resource_id = $1 and action = 'idempotency.resolved'", [toResolve]);
    expect(resolvedEvents).toHaveLength(1);
    expect(resolvedEvents[0]).toMatchObject({ actor_type: 'user', reason_code: 'OPERATOR_RESOLVED_COMMITTED' });
    expect(resolvedEvents[0]?.details).toMatchObject({ reason: 'found it in the provider', outcome: 'committed' });
    expect(eventsForRecord((await ledger.get(toResolve))!).at(-1)?.eventId).toBe(resolvedEvents[0]?.event_id);

    expect(refused.code).toBe(6);
    expect(refused.stderr).toContain('it is completed (epoch 1), not unknown');
    expect(await ledger.get(settled)).toMatchObject({ status: 'completed', epoch: 1 });
    expect(await auditRows('resource_id = $1 and actor_type = $2', [settled, 'user'])).toHaveLength(0);

    expect(absent.code).toBe(5);
  });

  it('timeline prints the events of a task (human and --json); an unknown task exits 5', async () => {
    const key = await completed('timeline:1', 'ok', { taskId: 'task-tl' });
    const record = (await ledger.get(key))!;
    const base = {
      operation: 'assets.create',
      key,
      taskId: 'task-tl',
      jobId: record.jobId as string,
      attemptsMade: 0,
      attemptsStarted: 1,
      stalledCounter: 0,
    };
    const events: AuditEvent[] = [
      auditEventFromWrapper({ ...base, type: 'claimed', decision: 'allow', epoch: 1, at: record.claimedAt }, 'w1'),
      auditEventFromWrapper(
        {
          ...base,
          type: 'decision',
          decision: 'pending_confirmation',
          epoch: 1,
          seq: 0,
          at: record.claimedAt,
          details: { action: 'tool.create_asset', resourceType: 'asset', resourceId: 'a1' },
        },
        'w1',
      ),
      auditEventFromWrapper({ ...base, type: 'completed', decision: 'allow', epoch: 1, at: record.updatedAt }, 'w1'),
    ];
    expect(await new AuditStore(ledger.pool, t.schema).writeBatch(events)).toMatchObject({ inserted: 3 });
    const [human, json, byOperation, none] = await Promise.all([
      cli(['timeline', 'task-tl']),
      cli(['timeline', 'task-tl', '--json']),
      cli(['timeline', '--operation', key]),
      cli(['timeline', 'task-nothing']),
    ]);
    expect(human.code, human.stderr).toBe(0);
    const lines = human.stdout.split('\n');
    const at = (action: string) => lines.findIndex((l) => l.includes(action));
    expect(human.stdout).toContain('idempotency.claimed');
    expect(at('tool.create_asset')).toBeGreaterThan(at('idempotency.claimed'));
    expect(at('idempotency.completed')).toBeGreaterThan(at('tool.create_asset'));
    expect(human.stdout).toContain('attempts: 1, takeovers: 0, replays: 0');
    expect(human.stdout).toContain(`final: ${key} completed (epoch 1)`);

    expect(json.code, json.stderr).toBe(0);
    const tl = JSON.parse(json.stdout);
    expect(tl.events.map((e: AuditEvent) => e.eventId)).toEqual(events.map((e) => e.eventId));
    expect(tl.attempts).toMatchObject([{ operationId: key, epoch: 1, start: 'claimed', end: 'completed' }]);

    expect(byOperation.code, byOperation.stderr).toBe(0);
    expect(byOperation.stdout).toContain('tool.create_asset');

    expect(none.code).toBe(5);
    expect(none.stderr).toContain('no audit events for the task id given (not echoed)');
    expect(none.stderr).not.toContain('task-nothing');
  });

  it('sweep deletes expired rows (audited); stats counts; backfill --inline and --wait enqueue the derived events', async () => {
    const expired = await completed('sweep:1', 'old', { retentionMs: 1 });
    // Expired on the database clock (1 ms after its completion), which decides the sweep.
    await waitFor(
      async () =>
        (
          await t.query<{ expired: boolean }>(
            `select updated_at + retention_ms * interval '1 millisecond' < now() as expired
             from ${t.schema}.idempotency_ledger where key = $1`,
            [expired],
          )
        ).rows[0]?.expired,
      'the row to expire',
    );
    // Its transitions' audit events are not stored yet: the sweep keeps the row.
    const kept = await cli(['sweep', '--json', '--actor', 'carol']);
    expect(kept.code, kept.stderr).toBe(0);
    expect(JSON.parse(kept.stdout)).toMatchObject({ deleted: 0, pending: 1 });
    const record = await ledger.get(expired);
    if (!record) throw new Error('the sweep deleted a row whose events were not stored');
    await new AuditStore(ledger.pool, t.schema).writeBatch(eventsForRecord(record));
    const swept = await cli(['sweep', '--json', '--actor', 'bob']);
    expect(swept.code, swept.stderr).toBe(0);
    expect(JSON.parse(swept.stdout)).toMatchObject({ deleted: 1, batches: 1, pending: 0 });
    expect(await ledger.get(expired)).toBeNull();
    expect(await auditRows("action = 'idempotency.swept' and actor_id = 'bob'")).toHaveLength(1);

    const auditQueue = b.queue('audit');
    const worker = createBackfillWorker({
      connection: { url: t.redisUrl },
      prefix: t.prefix,
      pool: ledger.pool,
      schema: t.schema,
      auditQueue,
    });
    t.track(
      'backfill worker',
      () => !worker.isRunning(),
      () => worker.close(),
    );
    const rows = Number((await t.query(`select count(*) from ${t.schema}.idempotency_ledger`)).rows[0]?.count);
    const statsFrom = Date.now();
    const [human, json, inline, waited] = await Promise.all([
      cli(['stats']),
      cli(['stats', '--json']),
      cli(['backfill', '--inline', '--name', 'inline', '--page-size', '2', '--json']),
      cli(['backfill', '--wait', '--name', 'queued', '--since', '1970-01-01']),
    ]);
    await worker.close();
    const statsTo = Date.now();

    expect(human.code, human.stderr).toBe(0);
    expect(human.stdout).toMatch(/^ {2}completed\s+\d+$/m);
    expect(human.stdout).toMatch(/^ {2}unknown\s+0$/m);
    expect(human.stdout).toContain('dead letters  0');
    expect(json.code, json.stderr).toBe(0);
    const st = JSON.parse(json.stdout);
    const byStatus = await t.query(
      `select status, count(*)::int as n from ${t.schema}.idempotency_ledger group by status`,
    );
    for (const r of byStatus.rows) expect(st.ledger.byStatus[r.status]).toBe(r.n);
    expect(st.ledger.total).toBe(rows);
    // The lag is the age, when stats read it, of the oldest event not yet written (0 with none).
    if (st.audit.oldestPendingAt === null) expect(st.audit.lagMs).toBe(0);
    else {
      const oldest = Date.parse(st.audit.oldestPendingAt);
      expect(st.audit.lagMs).toBeGreaterThanOrEqual(Math.max(0, statsFrom - oldest));
      expect(st.audit.lagMs).toBeLessThanOrEqual(statsTo - oldest);
    }
    expect(st.audit.outbox).toMatchObject({ batches: 0, events: 0 });
    expect(st.audit.deadLetters.count).toBe(0);

    expect(inline.code, inline.stderr).toBe(0);
    expect(JSON.parse(inline.stdout)).toMatchObject({ name: 'inline', rowsScanned: rows, done: true });
    expect(inline.stderr).toMatch(/backfill: rows \d+\/\d+ \(100%\).* done/);

    expect(waited.code, waited.stderr).toBe(0);
    expect(waited.stdout).toContain(`backfill done: ${rows} ledger rows scanned`);
    expect(waited.stderr).toMatch(new RegExp(`backfill: rows ${rows}/${rows} \\(100%\\)`));
    // The derived events wait on the audit queue for the writer (not running in this test).
    const counts = await auditQueue.getJobCounts('waiting', 'prioritized');
    expect((counts.waiting ?? 0) + (counts.prioritized ?? 0)).toBeGreaterThan(0);
    await auditQueue.close();
  });

  it('stats reports the audit lag as the age of the oldest event not yet written (outbox, then the audit queue)', async () => {
    const event = sampleAuditEvent('cli-stats', 'parked');
    await t.query(
      `insert into ${t.schema}.audit_outbox (events, reason, created_at) values ($1, 'ECONNREFUSED', now() - interval '10 minutes')`,
      [JSON.stringify([event])],
    );
    const auditQueue = b.queue('audit');
    const stuck = await auditQueue.add(AUDIT_JOB_NAME, { events: [event] }, { delay: 3_600_000 });
    const client = await auditQueue.backend.client;
    await client.hset(auditQueue.toKey(stuck.id as string), { timestamp: Date.now() - 20 * 60_000 });
    try {
      // Events were written a moment ago by the tests above: the time since the newest would be short.
      const [withQueue, outboxOnly, human, redisDown] = await Promise.all([
        cli(['stats', '--json']),
        cli(['stats', '--json'], { REDIS_URL: undefined }),
        cli(['stats']),
        cli(['stats'], { REDIS_URL: 'redis://127.0.0.1:1' }),
      ]);

      expect(withQueue.code, withQueue.stderr).toBe(0);
      const q = JSON.parse(withQueue.stdout);
      expect(q.audit.lagMs).toBeGreaterThanOrEqual(20 * 60_000);
      expect(q.audit.lagMs).toBeLessThan(25 * 60_000);
      expect(q.audit.queue.delayed).toBe(1);
      expect(q.audit.outbox).toMatchObject({ batches: 1, events: 1 });
      expect(outboxOnly.code, outboxOnly.stderr).toBe(0);
      const o = JSON.parse(outboxOnly.stdout);
      expect(o.audit.lagMs).toBeGreaterThanOrEqual(10 * 60_000);
      expect(o.audit.lagMs).toBeLessThan(15 * 60_000);
      expect(o.audit.queue).toBeNull();
      expect(o.audit.queueNotRead).toBe('REDIS_URL unset');
      expect(human.code, human.stderr).toBe(0);
      expect(human.stdout).toMatch(/^ {2}lag {11}2\dm.*: the oldest event not yet written was made /m);
      expect(human.stdout).toMatch(/^ {2}audit queue {3}\d+ waiting, 1 delayed, 0 active, 0 failed$/m);
      // During a Redis outage the figures Postgres holds are still there.
      expect(redisDown.code, redisDown.stderr).toBe(0);
      expect(redisDown.stdout).toMatch(/^ {2}lag {11}1\dm.*: the oldest event not yet written was made /m);
      expect(redisDown.stdout).toMatch(
        /^ {2}audit queue {3}not read \(Redis unreachable: .+\): the lag counts the outbox only$/m,
      );
    } finally {
      await stuck.remove();
      await auditQueue.close();
      await t.query(`delete from ${t.schema}.audit_outbox`);
    }
  });

  it('takes the connection flags before or after the command; a flag wins over its variable, and its errors name it', async () => {
    const key = await completed('flags:1', { assetId: 'f1' });
    const unset = { DATABASE_URL: undefined, REDIS_URL: undefined, BQI_SCHEMA: undefined, BQI_PREFIX: undefined };
    const [after, before, wins, named] = await Promise.all([
      cli(['inspect', key, '--json', '--database-url', t.databaseUrl, '--schema', t.schema], unset),
      cli(
        [
          '--database-url',
          t.databaseUrl,
          '--redis-url',
          t.redisUrl,
          '--schema',
          t.schema,
          '--prefix',
          t.prefix,
          'stats',
          '--json',
        ],
        unset,
      ),
      cli(['inspect', key, '--json', '--database-url', t.databaseUrl], {
        DATABASE_URL: 'postgres://postgres@127.0.0.1:1/test',
      }),
      cli(['stats', '--database-url', 'mysql://db/x'], { DATABASE_URL: undefined }),
    ]);

    expect(after.code, after.stderr).toBe(0);
    expect(JSON.parse(after.stdout)).toMatchObject({ key, status: 'completed' });
    expect(before.code, before.stderr).toBe(0);
    expect(JSON.parse(before.stdout)).toMatchObject({ schema: t.schema, audit: { queue: { failed: 0 } } });
    expect(wins.code, wins.stderr).toBe(0);
    expect(JSON.parse(wins.stdout)).toMatchObject({ key });
    expect(named.code).toBe(3);
    expect(named.stderr).toBe('IDEMPOTENCY_ENV_CONFIG: --database-url must be a postgres:// URL\n');
  });
});
