/**
 * Confirmation requests answered by people: the store (one request per operation key and name),
 * the real CLI binary (`confirmations list`, `confirm`), the HTTP handler served by node:http, and
 * the timeout on the database clock. The jobs that wait for them are in confirm-worker.test.ts.
 */
import { createHash } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AuditStore } from '../../src/audit/audit-store.js';
import { confirmationEvent } from '../../src/audit/confirmation-event.js';
import { renderTimeline, timeline } from '../../src/audit/timeline.js';
import { loadConfig } from '../../src/config/env.js';
import { answerConfirmation } from '../../src/confirm/answer.js';
import { ConfirmationStore, type NewConfirmation } from '../../src/confirm/confirmation-store.js';
import { ConfirmationAnsweredError, ConfirmationTimedOutError } from '../../src/confirm/errors.js';
import { confirmationHttpHandler } from '../../src/confirm/http-handler.js';
import type { PostgresLedger } from '../../src/ledger/postgres-ledger.js';
import { startOperationsProcess } from '../../src/ops/operations-process.js';
import { TestContext, waitFor } from '../helpers/context.js';
import { childEnv, runTs } from '../helpers/spawn.js';

const t = new TestContext('confirm_answer');
let pool: pg.Pool;
let store: ConfirmationStore;
let ledger: PostgresLedger;
let n = 0;

const env = () =>
  childEnv({ DATABASE_URL: t.databaseUrl, REDIS_URL: t.redisUrl, BQI_SCHEMA: t.schema, BQI_PREFIX: t.prefix });
// A process start each: slow on a loaded machine, so a generous deadline.
const cli = (args: string[]) => runTs('src/cli/main.ts', args, env(), 120_000);

function request(over: Partial<NewConfirmation> = {}): NewConfirmation {
  n++;
  return {
    operationKey: `acme%2Fpay:order%3Ao-${n}:v1`,
    name: 'large-payment',
    operation: 'payments.charge',
    reason: `charge 5000 cents for order o-${n}`,
    onTimeout: 'deny',
    timeoutMs: 3_600_000,
    taskId: `task-${n}`,
    jobId: `job-${n}`,
    queue: 'payments',
    epoch: 1,
    ...over,
  };
}

async function eventRows(eventId: string) {
  return (
    await t.query(
      `select actor_type, actor_id, decision, reason_code from ${t.schema}.audit_events where event_id = $1`,
      [eventId],
    )
  ).rows;
}

beforeAll(async () => {
  await t.setup();
  pool = t.pool();
  store = new ConfirmationStore(pool, t.schema);
  ledger = t.ledger();
});
afterAll(async () => {
  await ledger.close();
  await pool.end();
  await t.teardown();
});

describe('confirmation requests', () => {
  it('one request per operation key and name, however many attempts ask at once', async () => {
    const req = request();
    const all = await Promise.all(Array.from({ length: 20 }, () => store.request(req)));
    expect(new Set(all.map((c) => c.id)).size).toBe(1);
    expect(all.filter((c) => c.created)).toHaveLength(1);
    const rows = await t.query(
      `select count(*)::int as n from ${t.schema}.idempotency_confirmations where operation_key = $1`,
      [req.operationKey],
    );
    expect(rows.rows[0]?.n).toBe(1);
    // Another name of the same operation is another request.
    const other = await store.request({ ...req, name: 'second-look' });
    expect(other.id).not.toBe(all[0]?.id);
    expect(other.created).toBe(true);
  });

  it('confirm --approve through the CLI: recorded once, audited as a user decision; again: no change; --deny: refused', async () => {
    const c = await store.request(request());
    const listed = await cli(['confirmations', 'list', '--pending', '--json']);
    expect(listed.code).toBe(0);
    const pending = JSON.parse(listed.stdout).confirmations as { id: string; status: string; reason: string }[];
    expect(pending.find((p) => p.id === c.id)).toMatchObject({ status: 'pending', reason: c.reason });

    const first = await cli([
      'confirm',
      c.id,
      '--approve',
      '--reason',
      'invoice checked',
      '--actor',
      'alice',
      '--json',
    ]);
    expect(first.stderr).toBe('');
    expect(first.code).toBe(0);
    const out = JSON.parse(first.stdout);
    expect(out).toMatchObject({ recorded: true, confirmation: { status: 'approved', answeredBy: 'alice' } });
    expect(await eventRows(out.auditEventId)).toEqual([
      { actor_type: 'user', actor_id: 'alice', decision: 'allow', reason_code: 'CONFIRMATION_APPROVED' },
    ]);

    // The request's event, as the waiting worker tells it (confirm-worker.test.ts): the timeline
    // then has the request, the wait and the answer with who gave it.
    const audit = new AuditStore(pool, t.schema);
    await audit.writeBatch([confirmationEvent('requested', c)]);
    const pendingRow = (
      await t.query(
        `select count(*)::int as n, min(requested_at) as oldest from ${t.schema}.idempotency_confirmations where status = 'pending'`,
      )
    ).rows[0] as { n: number; oldest: Date };
    const pendingNow = pendingRow.n;
    // Independent of each other: run at once (each is a process start on a loaded machine).
    const [again, conflicting, unknownId, neither, stats] = await Promise.all([
      cli(['confirm', c.id, '--approve', '--reason', 'clicked twice', '--actor', 'bob']),
      cli(['confirm', c.id, '--deny', '--reason', 'changed my mind', '--actor', 'bob']),
      cli(['confirm', 'cf-999999', '--approve', '--reason', 'x']),
      cli(['confirm', c.id, '--reason', 'x']),
      cli(['stats', '--json']),
    ]);
    expect(JSON.parse(stats.stdout).confirmations).toEqual({
      pending: pendingNow,
      oldestPendingAt: pendingRow.oldest.toISOString(),
    });
    expect(pendingNow).toBeGreaterThan(0);
    const story = await timeline({ taskId: c.taskId as string }, { store: audit, ledger });
    expect(story.confirmations).toEqual([
      {
        id: c.id,
        operationId: c.operationKey,
        requestedBy: 'agent:payments.charge',
        since: c.requestedAt.toISOString(),
        until: out.confirmation.answeredAt,
        waitedMs: Date.parse(out.confirmation.answeredAt) - c.requestedAt.getTime(),
        status: 'approved',
        answeredBy: 'user:alice',
        reasonCode: 'CONFIRMATION_APPROVED',
      },
    ]);
    expect(renderTimeline(story)).toMatch(new RegExp(`confirmation ${c.id} approved by user:alice after`));
    expect(again.code).toBe(0);
    expect(again.stdout).toMatch(/already approved by alice at .*: nothing changed/);
    expect(conflicting.code).toBe(6);
    expect(conflicting.stderr).toMatch(/IDEMPOTENCY_CONFIRMATION_ANSWERED/);
    expect(unknownId.code).toBe(5);
    expect(unknownId.stderr).toMatch(/IDEMPOTENCY_CONFIRMATION_NOT_FOUND/);
    expect(neither.code).toBe(2);
    const row = await store.get(c.id);
    expect(row).toMatchObject({ status: 'approved', answeredBy: 'alice', comment: 'invoice checked' });
    expect(await eventRows(out.auditEventId)).toHaveLength(1);
  }, 240_000);

  it('an --actor that is an e-mail address is stored and listed as the keyed ref the audit event holds, never in clear', async () => {
    const c = await store.request(request());
    const old = await store.request(request());
    // Answered before actors were stored as the trail tells them.
    await t.query(
      `update ${t.schema}.idempotency_confirmations set status = 'approved', answered_at = now(),
         answered_by = 'carol@example.com', answered_by_type = 'user' where n = $1`,
      [old.id.slice(3)],
    );
    const answered = await cli([
      'confirm',
      c.id,
      '--approve',
      '--reason',
      'ok',
      '--actor',
      'bob@example.com',
      '--json',
    ]);
    expect(answered.code).toBe(0);
    const stored = (await store.get(c.id)).answeredBy as string;
    expect(stored).toMatch(/^hmac:/);
    const out = JSON.parse(answered.stdout);
    expect(out.confirmation.answeredBy).toBe(stored);
    expect(await eventRows(out.auditEventId)).toEqual([
      { actor_type: 'user', actor_id: stored, decision: 'allow', reason_code: 'CONFIRMATION_APPROVED' },
    ]);
    const [listed, text] = await Promise.all([
      cli(['confirmations', 'list', '--after', `cf-${Number(c.id.slice(3)) - 1}`, '--json']),
      cli(['confirmations', 'list', '--after', `cf-${Number(c.id.slice(3)) - 1}`]),
    ]);
    expect(listed.code).toBe(0);
    const rows = JSON.parse(listed.stdout).confirmations as { id: string; answeredBy: string }[];
    expect(rows.find((r) => r.id === c.id)?.answeredBy).toBe(stored);
    expect(rows.find((r) => r.id === old.id)?.answeredBy).toMatch(/^hmac:/);
    for (const output of [answered.stdout, listed.stdout, text.stdout]) expect(output).not.toContain('example.com');
    expect(text.stdout).toContain(stored);
  }, 240_000);

  it('the library answer: the same answer is idempotent, a different one throws with a stable code', async () => {
    const c = await store.request(request());
    const a = await answerConfirmation({
      pool,
      schema: t.schema,
      id: c.id,
      approve: false,
      actor: 'carol',
      comment: 'no',
    });
    expect(a).toMatchObject({
      recorded: true,
      confirmation: { status: 'denied', reasonCode: 'IDEMPOTENCY_CONFIRMATION_DENIED' },
    });
    const b = await answerConfirmation({ pool, schema: t.schema, id: c.id, approve: false, actor: 'dave' });
    expect(b.recorded).toBe(false);
    expect(b.confirmation.answeredBy).toBe('carol');
    const err = await answerConfirmation({ pool, schema: t.schema, id: c.id, approve: true, actor: 'dave' }).catch(
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ConfirmationAnsweredError);
    expect((err as ConfirmationAnsweredError).code).toBe('IDEMPOTENCY_CONFIRMATION_ANSWERED');
    expect(await eventRows(a.auditEventId)).toEqual([
      { actor_type: 'user', actor_id: 'carol', decision: 'deny', reason_code: 'IDEMPOTENCY_CONFIRMATION_DENIED' },
    ]);
  });

  it('an unanswered request times out on the database clock: a late answer is refused, the timeout audited', async () => {
    const c = await store.request(request({ timeoutMs: 300 }));
    expect(c.overdue).toBe(false);
    await waitFor(async () => (await store.get(c.id)).overdue, 'the request to be overdue', 10_000, 50);
    const late = await cli(['confirm', c.id, '--approve', '--reason', 'too late', '--actor', 'alice']);
    expect(late.code).toBe(6);
    expect(late.stderr).toMatch(/IDEMPOTENCY_CONFIRMATION_TIMED_OUT/);
    const row = await store.get(c.id);
    expect(row).toMatchObject({
      status: 'timed_out',
      answeredByType: 'system',
      reasonCode: 'IDEMPOTENCY_CONFIRMATION_TIMED_OUT',
    });
    expect(row.answeredAt?.getTime()).toBe(row.expiresAt.getTime());
    expect(await eventRows(confirmationEvent('timedOut', row).eventId)).toEqual([
      {
        actor_type: 'system',
        actor_id: 'confirmation-timeout',
        decision: 'deny',
        reason_code: 'IDEMPOTENCY_CONFIRMATION_TIMED_OUT',
      },
    ]);
    const again = await answerConfirmation({ pool, schema: t.schema, id: c.id, approve: false, actor: 'x' }).catch(
      (e: unknown) => e,
    );
    expect(again).toBeInstanceOf(ConfirmationTimedOutError);
  }, 240_000);
});

describe('the HTTP endpoint', () => {
  const token = 'confirm-token-0123456789abcdefghijklmnop';
  let server: Server;
  let url: string;
  beforeAll(async () => {
    // The deprecated shared token: one operator of every namespace, named by configuration.
    const handle = confirmationHttpHandler({ pool, schema: t.schema, token, actor: 'chatops-bob' });
    server = createServer((req, res) => void handle(req, res));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/confirmations`;
  });
  afterAll(async () => {
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  const post = (path: string, body: unknown, auth?: string) =>
    fetch(`${url}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(auth ? { authorization: auth } : {}) },
      body: JSON.stringify(body),
    });

  it('refuses a missing or wrong token and records nothing; answers with the right one', async () => {
    const c = await store.request(request());
    const answer = { decision: 'approve', reason: 'ok from chat' };
    for (const auth of [undefined, 'Bearer wrong', `Bearer ${token}x`, `Bearer ${token.slice(0, -1)}`, token]) {
      const res = await post(`/${c.id}`, answer, auth);
      expect(res.status).toBe(401);
      expect(((await res.json()) as { code: string }).code).toBe('UNAUTHORIZED');
    }
    expect((await fetch(url)).status).toBe(401);
    expect((await store.get(c.id)).status).toBe('pending');

    const listed = await fetch(`${url}?pending=true`, { headers: { authorization: `Bearer ${token}` } });
    expect(listed.status).toBe(200);
    expect(((await listed.json()) as { confirmations: { id: string }[] }).confirmations.map((x) => x.id)).toContain(
      c.id,
    );

    const ok = await post(`/${c.id}`, answer, `Bearer ${token}`);
    expect(ok.status).toBe(200);
    const body = (await ok.json()) as { recorded: boolean; auditEventId: string; confirmation: { status: string } };
    expect(body).toMatchObject({ recorded: true, confirmation: { status: 'approved' } });
    expect(await eventRows(body.auditEventId)).toEqual([
      { actor_type: 'user', actor_id: 'chatops-bob', decision: 'allow', reason_code: 'CONFIRMATION_APPROVED' },
    ]);
    const conflicting = await post(`/${c.id}`, { ...answer, decision: 'deny' }, `Bearer ${token}`);
    expect(conflicting.status).toBe(409);
    expect(((await conflicting.json()) as { code: string }).code).toBe('IDEMPOTENCY_CONFIRMATION_ANSWERED');
    const bad = await post(`/${c.id}`, { decision: 'maybe' }, `Bearer ${token}`);
    expect(bad.status).toBe(400);
    const missing = await post('/cf-999999', answer, `Bearer ${token}`);
    expect(missing.status).toBe(404);
    expect((await store.get(c.id)).answeredBy).toBe('chatops-bob');
  });

  it('refuses a short token, and a shared token without the actor it answers as, at configuration', () => {
    expect(() => confirmationHttpHandler({ pool, token: 'short', actor: 'ops' })).toThrow(/at least 32 characters/);
    const urls = { DATABASE_URL: t.databaseUrl, REDIS_URL: t.redisUrl };
    expect(() => loadConfig({ ...urls, BQI_CONFIRM_TOKEN: 'short', BQI_CONFIRM_ACTOR: 'ops' })).toThrow(
      /BQI_CONFIRM_TOKEN/,
    );
    // The actor came from each request's body: now the configuration names it, or there is no endpoint.
    expect(() => confirmationHttpHandler({ pool, token })).toThrow(/needs `actor`/);
    expect(() => loadConfig({ ...urls, BQI_CONFIRM_TOKEN: token })).toThrow(/BQI_CONFIRM_ACTOR.*BQI_OPERATORS/s);
    expect(loadConfig({ ...urls, BQI_CONFIRM_TOKEN: token, BQI_CONFIRM_ACTOR: 'ops' }).operators).toEqual([
      { actor: 'ops', namespaces: ['*'], sha256: createHash('sha256').update(token).digest('hex') },
    ]);
  });

  it('the operations process serves it at /confirmations with BQI_CONFIRM_TOKEN and BQI_CONFIRM_ACTOR, and not without', async () => {
    const base = {
      DATABASE_URL: t.databaseUrl,
      REDIS_URL: t.redisUrl,
      BQI_SCHEMA: t.schema,
      BQI_PREFIX: t.prefix,
      BQI_AUDIT_QUEUE: 'audit-confirm',
      BQI_HTTP_PORT: '0',
      BQI_HTTP_HOST: '127.0.0.1',
      LOG_LEVEL: 'silent',
    };
    const c = await store.request(request());
    const off = await startOperationsProcess(loadConfig(base));
    try {
      const res = await fetch(`http://127.0.0.1:${off.http?.address?.port}/confirmations/${c.id}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ decision: 'approve', reason: 'x' }),
      });
      expect(res.status).toBe(404); // off by default
    } finally {
      await off.close();
    }
    const on = await startOperationsProcess(
      loadConfig({ ...base, BQI_CONFIRM_TOKEN: token, BQI_CONFIRM_ACTOR: 'ops-desk' }),
    );
    try {
      const at = `http://127.0.0.1:${on.http?.address?.port}/confirmations/${c.id}`;
      const send = (auth: string) =>
        fetch(at, {
          method: 'POST',
          headers: { authorization: auth, 'content-type': 'application/json' },
          body: JSON.stringify({ decision: 'deny', reason: 'not this one' }),
        });
      expect((await send('Bearer not-the-token')).status).toBe(401);
      expect((await store.get(c.id)).status).toBe('pending');
      expect((await send(`Bearer ${token}`)).status).toBe(200);
      expect(await store.get(c.id)).toMatchObject({ status: 'denied', answeredBy: 'ops-desk' });
    } finally {
      await on.close();
    }
  });
});
