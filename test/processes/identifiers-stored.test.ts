/**
 * The same identifier rules wherever an id is stored or shown. A task id, job id, step name,
 * confirmation name or answering actor is kept in clear when it matches an identifier format
 * (built-in or declared), and as the keyed ref the audit event holds otherwise: in the audit
 * event, the ledger's columns and transitions, the confirmation's row, the log lines, the metric
 * labels and the CLI's output. A lookup by the id the application used finds the task in every
 * form it was stored in.
 */
import { randomBytes } from 'node:crypto';
import type { Queue } from 'bullmq';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { identifierAsStored } from '../../src/audit/stored-identifier.js';
import { auditPolicyFor } from '../../src/config/audit-policy.js';
import { actorIdAsTold } from '../../src/confirm/actor-id.js';
import { createIdempotencyMetrics } from '../../src/observability/metrics.js';
import type { Idempotency } from '../../src/runtime/create-idempotency.js';
import { defineKeyring } from '../../src/sealing/keyring.js';
import { errorSecrets } from '../fixtures/error-secrets.js';
import { testOperation } from '../fixtures/operations.js';
import { BUILTIN_FRESH, PERSONAL_FORMATS } from '../fixtures/personal-corpus.js';
import { cliEnv } from '../helpers/cli-env.js';
import { TestContext, waitFor } from '../helpers/context.js';
import { TEST_KEYRING_SPEC } from '../helpers/keyring.js';
import { capturePino } from '../helpers/pino-capture.js';
import { testRuntime } from '../helpers/runtime.js';
import { runTs } from '../helpers/spawn.js';

const t = new TestContext('identifiers_stored');
const OLD_SECRET = 'base64:9mJq1c2xv0yH8cKkQeVbq3yJ1tTzq2m8rVf3a6W7nYc=';
const NEW_SPEC = `t2:base64:${randomBytes(32).toString('base64')},${TEST_KEYRING_SPEC}`;
const keyring = defineKeyring({ keys: [{ id: 't1', secret: OLD_SECRET }] });
const policy = auditPolicyFor(keyring);
const cli = (args: string[], spec = TEST_KEYRING_SPEC) =>
  runTs('src/cli/main.ts', args, cliEnv(t, { BQI_KEYRING: spec }));

/** A secret or personal value, and the part of it whose presence anywhere is a leak. */
type Secret = { name: string; value: string; needle: string };

/** The corpus: every personal-data format, every error-secret format, tokens of every length from 12 to 64. */
function secretCorpus(): Secret[] {
  const out: Secret[] = PERSONAL_FORMATS.map(([name, make]) => {
    const value = make();
    return { name, value, needle: value };
  });
  for (const s of errorSecrets()) if (s.value.length <= 200) out.push({ name: s.id, value: s.value, needle: s.needle });
  for (let n = 12; n <= 64; n += 4) {
    const v = randomBytes(n).toString('base64url').slice(0, n);
    out.push({ name: `base64url token, ${n} chars`, value: v, needle: v });
  }
  return out;
}

const op = testOperation({
  name: 'ids.charge',
  input: z.object({
    order: z.string(),
    step: z.string().optional(),
    confirm: z.string().optional(),
    fail: z.boolean().optional(),
  }),
  resourceKey: (i) => `order:${i.order}`,
  effect: (i) => ({ order: i.order }),
  lease: '5s',
  retention: '1d',
});

let idem: Idempotency;
const logs = capturePino({ level: 'debug' });
const metrics = createIdempotencyMetrics();
let queue: Queue;

beforeAll(async () => {
  await t.setup();
  idem = testRuntime(t, {
    audit: { writer: true, queue: 'audit' },
    logger: logs.logger,
    logErrorText: true,
    observer: metrics,
  });
  await idem.migrate();
  idem.worker(
    op,
    async (input, ctx) => {
      if (input.step) await ctx.step(input.step, async () => 1);
      if (input.confirm) await ctx.confirm({ name: input.confirm, reason: 'check', timeout: '1h', onTimeout: 'deny' });
      if (input.fail) throw new Error('declined');
      return { ok: true };
    },
    { concurrency: 8 },
  );
  queue = idem.queue(op);
}, 60_000);

afterAll(async () => {
  await idem?.close();
  await t.teardown();
});

const order = () => `o-${randomBytes(5).toString('hex')}`;

/** Everything stored about the schema's tasks, one text per row. */
async function storedTexts(): Promise<string[]> {
  const rows = await t.query<{ j: string }>(
    `select row_to_json(l)::text as j from ${t.schema}.idempotency_ledger l
     union all select row_to_json(e)::text from ${t.schema}.audit_events e
     union all select row_to_json(c)::text from ${t.schema}.idempotency_confirmations c`,
  );
  return rows.rows.map((r) => r.j);
}

async function completed(jobIds: string[]): Promise<void> {
  await waitFor(async () => {
    const states = await Promise.all(jobIds.map((id) => queue.getJobState(id)));
    return states.every((s) => s === 'completed' || s === 'failed');
  }, `${jobIds.length} jobs finished`);
}

describe('the same rule for every identifier field', () => {
  it('1,000 fresh values of each built-in format stay readable as task id, job id, step name and actor (the function every path calls)', () => {
    for (const [name, make] of BUILTIN_FRESH) {
      const values = Array.from({ length: 1000 }, make);
      for (const field of ['taskId', 'jobId', 'stepId', 'actorId'] as const) {
        const kept = values.filter((v) => identifierAsStored(field, v, policy) === v).length;
        expect(kept / values.length, `${name} as ${field}`).toBeGreaterThanOrEqual(0.99);
      }
      const actors = values.filter((v) => actorIdAsTold(v, policy) === v).length;
      expect(actors / values.length, `${name} as answered_by`).toBeGreaterThanOrEqual(0.99);
    }
  });

  it('no secret or personal value of the corpus is kept in clear in any field; each becomes the ref its audit event holds', () => {
    const corpus = Array.from({ length: 20 }, secretCorpus).flat();
    expect(new Set(corpus.map((s) => s.name)).size).toBeGreaterThanOrEqual(250);
    const passed: string[] = [];
    for (const s of corpus) {
      for (const field of ['taskId', 'jobId', 'stepId', 'actorId', 'resourceId'] as const) {
        const stored = identifierAsStored(field, s.value, policy);
        if (stored.includes(s.needle)) passed.push(`${s.name} as ${field}: ${s.value}`);
        else {
          expect(stored).toMatch(/^hmac:t1:/);
          expect(identifierAsStored(field, stored, policy)).toBe(stored);
        }
      }
      if (actorIdAsTold(s.value, policy).includes(s.needle)) passed.push(`${s.name} as answered_by: ${s.value}`);
    }
    // As in the audit grammar's own test (which bounds their share over 4,000 draws each): random
    // tokens of 12-16 characters pass a few times in 10,000 draws; nothing else ever does. A draw
    // that passes does so in every field: count draws, not fields (about 4 runs in 100 have one).
    const short = passed.filter((p) => /^(base62|base64url|base64) token, 1[2-6] chars as /.test(p));
    expect(passed.filter((p) => !short.includes(p))).toEqual([]);
    expect(new Set(short.map((p) => p.slice(p.indexOf(': ') + 2))).size).toBeLessThanOrEqual(2);
  });
});

describe('through the workers, the ledger, confirmations, logs, metrics and the CLI', () => {
  const builtin: { taskId: string; jobId: string; key: string; format: string }[] = [];
  const secret: { s: Secret; jobId: string; key: string }[] = [];

  it('built-in ids are stored as they are in the ledger, its transitions and the audit events; a job id of a built-in format is logged as it is', async () => {
    const jobs: string[] = [];
    for (const [format, make] of BUILTIN_FRESH) {
      for (let i = 0; i < 15; i++) {
        const taskId = make();
        const r = await idem.enqueue(op, { order: order(), step: make() }, { taskId });
        builtin.push({ taskId, jobId: r.jobId, key: r.idempotencyKey, format });
        jobs.push(r.jobId);
      }
    }
    // Jobs of the application's own ids that fail once: the warn line names the job.
    const ownIds = BUILTIN_FRESH.map(([, make]) => make());
    for (const id of ownIds) {
      await queue.add('ids.charge', { order: order(), fail: true }, { jobId: id, attempts: 1 });
      jobs.push(id);
    }
    await completed(jobs);
    const rows = await t.query<{ task_id: string; step_id: string | null; key: string; transitions: string }>(
      `select task_id, step_id, key, transitions::text from ${t.schema}.idempotency_ledger where task_id is not null`,
    );
    const byKey = new Map(rows.rows.map((r) => [r.key, r.task_id]));
    for (const b of builtin) expect(byKey.get(b.key), `${b.format} ${b.taskId} in task_id`).toBe(b.taskId);
    const stepRows = rows.rows.filter((r) => r.step_id !== null);
    expect(stepRows.filter((r) => !r.step_id?.startsWith('hmac:')).length / stepRows.length).toBeGreaterThanOrEqual(
      0.99,
    );
    expect(rows.rows.filter((r) => r.transitions.includes(`"k":"${r.task_id}"`)).length).toBe(rows.rows.length);
    await waitFor(async () => {
      const n = await t.query<{ n: number }>(
        `select count(distinct task_id)::int as n from ${t.schema}.audit_events where task_id = any($1::text[])`,
        [builtin.map((b) => b.taskId)],
      );
      return n.rows[0]?.n === builtin.length;
    }, 'every built-in task id in clear in the audit events');
    for (const id of ownIds) expect(logs.lines(), `job id ${id} in the warn line`).toContain(`"jobId":"${id}"`);
  });

  it('no secret or personal value is stored or shown anywhere: ledger, transitions, audit events, confirmations, logs, metrics', async () => {
    const jobs: string[] = [];
    const corpus = secretCorpus();
    for (const s of corpus) {
      const r = await idem.enqueue(op, { order: order() }, { taskId: s.value });
      secret.push({ s, jobId: r.jobId, key: r.idempotencyKey });
      jobs.push(r.jobId);
    }
    // Confirmation names and the application's own job ids, where each takes the value. (A step's
    // name is part of its key, which key rules govern, like a resource key: not an id field.)
    const named = corpus.filter((s) => /^[A-Za-z0-9._-]{1,100}$/.test(s.value) && !/^[0-9]+$/.test(s.value));
    expect(named.length).toBeGreaterThanOrEqual(20);
    for (const s of named) {
      await queue.add('ids.charge', { order: order(), fail: true }, { jobId: s.value, attempts: 1 });
      jobs.push(s.value);
    }
    const confirmed = named.slice(0, 6);
    const parked = [];
    for (const s of confirmed) {
      parked.push(await idem.enqueue(op, { order: order(), confirm: s.value }, { taskId: s.value }));
    }
    await completed(jobs);
    // Answer each request as a person whose id is personal data.
    let pending: Awaited<ReturnType<typeof idem.confirmations.list>> = [];
    await waitFor(async () => {
      pending = await idem.confirmations.list({ pending: true });
      return pending.length === confirmed.length;
    }, 'the confirmation requests');
    const actors = corpus.slice(0, confirmed.length);
    for (const [i, c] of pending.entries()) {
      await idem.confirmations.answer(c.id, { approve: true, actor: (actors[i] as Secret).value });
    }
    await completed(parked.map((p) => p.jobId));
    await waitFor(async () => {
      const n = await t.query<{ n: number }>(
        `select count(*)::int as n from ${t.schema}.audit_events where action = 'confirmation.answer'`,
      );
      return n.rows[0]?.n === confirmed.length;
    }, 'the answers in the trail');
    await idem.flush();

    const texts = await storedTexts();
    const metricText = (await metrics.render()).body;
    const leaks: string[] = [];
    for (const s of [...corpus, ...actors]) {
      if (texts.some((x) => x.includes(s.needle) || x.includes(JSON.stringify(s.needle).slice(1, -1))))
        leaks.push(`${s.name}: stored ${texts.find((x) => x.includes(s.needle))?.slice(0, 900)}`);
      if (logs.lines().includes(s.needle)) leaks.push(`${s.name}: logged`);
      if (metricText.includes(s.needle)) leaks.push(`${s.name}: metric`);
    }
    expect(leaks).toEqual([]);
    // Each task id was stored as the ref its audit events hold: the ledger and the trail join.
    for (const x of secret.slice(0, 20)) {
      const ref = identifierAsStored('taskId', x.s.value, policy);
      const row = await t.query<{ task_id: string }>(
        `select task_id from ${t.schema}.idempotency_ledger where key = $1`,
        [x.key],
      );
      expect(row.rows[0]?.task_id).toBe(ref);
      const ev = await t.query<{ n: number }>(
        `select count(*)::int as n from ${t.schema}.audit_events where task_id = $1`,
        [ref],
      );
      expect(ev.rows[0]?.n).toBeGreaterThanOrEqual(1);
    }
    const answered = await t.query<{ answered_by: string }>(
      `select answered_by from ${t.schema}.idempotency_confirmations`,
    );
    expect(answered.rows.map((r) => r.answered_by).sort()).toEqual(
      actors.map((a) => identifierAsStored('actorId', a.value, policy)).sort(),
    );
  }, 120_000);

  it('timeline and the CLI find a task by the id the application used: in clear, as its ref, as an old clear row, under a rotated key', async () => {
    const ulidTask = builtin[0] as (typeof builtin)[number];
    const secretTask = secret.find((x) => x.s.name === 'e-mail') ?? (secret[0] as (typeof secret)[number]);
    // An old row: stored in clear before ids were stored as refs.
    await t.query(`update ${t.schema}.idempotency_ledger set task_id = $1 where key = $2`, [
      secretTask.s.value,
      secretTask.key,
    ]);
    for (const [task, key] of [
      [ulidTask.taskId, ulidTask.key],
      [secretTask.s.value, secretTask.key],
    ] as const) {
      // The writer stores a job's events a moment after it ends.
      await waitFor(
        async () => (await idem.timeline(task)).finalStates.some((f) => f.key === key),
        `the story of ${task}`,
      );
      // The CLI, with the keyring rotated (a new current key; the workers' refs are under the old one).
      for (const spec of [TEST_KEYRING_SPEC, NEW_SPEC]) {
        const tl = await cli(['timeline', task, '--json'], spec);
        expect(tl.code, tl.stderr).toBe(0);
        expect(JSON.parse(tl.stdout).finalStates.map((f: { key: string }) => f.key)).toContain(key);
        const list = await cli(['list', '--task', task, '--json'], spec);
        expect(list.code, list.stderr).toBe(0);
        expect(JSON.parse(list.stdout).records.map((r: { key: string }) => r.key)).toContain(key);
      }
    }
    // The old clear row and a new ref row of the same task both found.
    const again = await idem.enqueue(op, { order: order() }, { taskId: secretTask.s.value });
    await completed([again.jobId]);
    const both = await cli(['list', '--task', secretTask.s.value, '--json']);
    expect(
      JSON.parse(both.stdout)
        .records.map((r: { key: string }) => r.key)
        .sort(),
    ).toEqual([secretTask.key, again.idempotencyKey].sort());
    // What the CLI shows of a secret task id is its ref, never the value.
    const shown = await cli(['inspect', again.idempotencyKey, '--json']);
    expect(shown.code, shown.stderr).toBe(0);
    expect(shown.stdout).not.toContain(secretTask.s.needle);
    expect(shown.stdout).toContain(identifierAsStored('taskId', secretTask.s.value, policy));
    const listed = await cli(['confirmations', 'list', '--json']);
    for (const s of secret.map((x) => x.s)) expect(listed.stdout).not.toContain(s.needle);
  }, 300_000);
});

describe('stats', () => {
  it('reports refs made under a key the keyring does not hold', async () => {
    // A process keyed otherwise (no BQI_KEYRING: a key of its own) stored a task id as its ref.
    const other = auditPolicyFor(
      defineKeyring({ keys: [{ id: 'stray', secret: `base64:${randomBytes(32).toString('base64')}` }] }),
    );
    const strayRef = identifierAsStored('taskId', 'jane doe', other);
    expect(strayRef).toMatch(/^hmac:stray:/);
    const row = await t.query<{ key: string }>(`select key from ${t.schema}.idempotency_ledger limit 1`);
    await t.query(`update ${t.schema}.idempotency_ledger set task_id = $1 where key = $2`, [
      strayRef,
      row.rows[0]?.key,
    ]);
    const json = await cli(['stats', '--json']);
    expect(json.code, json.stderr).toBe(0);
    const refs = JSON.parse(json.stdout).refs;
    expect(refs.unknown).toEqual([{ keyId: 'stray', refs: 1 }]);
    expect(refs.byKey.t1).toBeGreaterThan(0);
    const text = await cli(['stats']);
    expect(text.stdout).toMatch(/refs .*UNKNOWN KEY: 1 under stray/);
  }, 60_000);
});
