/**
 * The operator console over real HTTP: sign-in and its cookie, the inbox against `stats`' counts,
 * escaping, anti-forgery refusals, namespaces (403), and a double submit recorded once. The data
 * is made by real workers (test/helpers/console-world.ts); the trail is read back from Postgres.
 */
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/env.js';
import { ConfirmationStore } from '../../src/confirm/confirmation-store.js';
import { esc, html } from '../../src/console/html.js';
import { ledgerStats } from '../../src/ledger/scans.js';
import { startOperationsProcess } from '../../src/ops/operations-process.js';
import { CANARY, ConsoleClient, type ConsoleWorld, startConsoleWorld, TOKENS } from '../helpers/console-world.js';
import { TestContext, waitFor } from '../helpers/context.js';

const t = new TestContext('console');
let world: ConsoleWorld;
let pool: pg.Pool;

beforeAll(async () => {
  await t.setup();
  pool = t.pool(2);
  world = await startConsoleWorld(t);
}, 120_000);

afterAll(async () => {
  await world?.close();
  await pool?.end();
  await t.teardown();
}, 60_000);

const events = async (where: string, params: unknown[]) =>
  (
    await pool.query<{ action: string; actor_id: string; details: { via?: string } }>(
      `select action, actor_id, details from ${t.schema}.audit_events where ${where}`,
      params,
    )
  ).rows;

describe('escaping', () => {
  it('escapes every character that could end a text or an attribute', () => {
    expect(esc(`<a href="x" onclick='y'>&\`</a>`)).toBe(
      '&lt;a href=&quot;x&quot; onclick=&#39;y&#39;&gt;&amp;&#96;&lt;/a&gt;',
    );
    const v = '"><script>alert(1)</script>';
    expect(html`<input value="${v}">`.text).toBe('<input value="&quot;&gt;&lt;script&gt;alert(1)&lt;/script&gt;">');
    expect(html`<p>${[html`<b>${'<i>'}</b>`, '<u>']}</p>`.text).toBe('<p><b>&lt;i&gt;</b>&lt;u&gt;</p>');
  });

  it('a request whose reason holds markup is shown as text in the inbox', async () => {
    await new ConfirmationStore(pool, t.schema).request({
      operationKey: `${encodeURIComponent('demo/xss')}:${encodeURIComponent('order:x')}:v1`,
      name: 'markup',
      operation: 'demo.xss',
      reason: '<script>alert("owned")</script><img src=x onerror=alert(1)>',
      onTimeout: 'deny',
      timeoutMs: 3_600_000,
      epoch: 1,
    });
    const c = new ConsoleClient(world.url);
    await c.signIn(TOKENS.alice);
    const page = await c.html('/');
    expect(page).toContain('&lt;script&gt;alert(&quot;owned&quot;)&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;');
    expect(page).not.toContain('<script>');
    expect(page).not.toContain('<img');
  });
});

describe('turning it on', () => {
  const env = {
    DATABASE_URL: t.databaseUrl,
    REDIS_URL: t.redisUrl,
    BQI_SCHEMA: t.schema,
    BQI_HTTP_PORT: '0',
    LOG_LEVEL: 'silent',
  };

  it('is off unless BQI_CONSOLE=on; anything else is a configuration error', () => {
    expect(loadConfig(env).console).toBeUndefined();
    expect(loadConfig({ ...env, BQI_CONSOLE: 'off' }).console).toBeUndefined();
    expect(loadConfig({ ...env, BQI_CONSOLE: 'on' }).console).toBe(true);
    expect(() => loadConfig({ ...env, BQI_CONSOLE: 'yes' })).toThrow(/BQI_CONSOLE must be on or off/);
    expect(loadConfig({ ...env, BQI_CONSOLE_DECRYPT: 'alice, bob' }).consoleDecrypt).toEqual(['alice', 'bob']);
  });

  it('a process without it answers 404 at /console; with it but no operator, it refuses to start', async () => {
    const off = await startOperationsProcess(loadConfig({ ...env, BQI_PREFIX: `${t.prefix}off` }));
    try {
      const res = await fetch(`http://127.0.0.1:${off.http?.address?.port}/console/login`);
      expect(res.status).toBe(404);
    } finally {
      await off.close();
    }
    await expect(
      startOperationsProcess(loadConfig({ ...env, BQI_PREFIX: `${t.prefix}x`, BQI_CONSOLE: 'on' })),
    ).rejects.toMatchObject({ code: 'IDEMPOTENCY_CONFIG' });
  });
});

describe('sign-in', () => {
  it('refuses a wrong token; a right one gets a session cookie (HttpOnly, SameSite=Strict), never the token back', async () => {
    const c = new ConsoleClient(world.url);
    expect((await c.signIn(`bqi_op_${'x'.repeat(43)}`)).status).toBe(401);
    expect((await c.get('/')).headers.get('location')).toBe('/console/login');
    const res = await c.signIn(TOKENS.alice);
    expect(res.status).toBe(303);
    const cookie = res.headers.get('set-cookie') ?? '';
    expect(cookie).toMatch(/^bqi_console=[A-Za-z0-9_-]{43}; Path=\/console; HttpOnly; SameSite=Strict$/);
    expect(cookie).not.toContain(TOKENS.alice);
    expect(res.headers.get('location')).toBe('/console');
    const page = await c.html('/');
    expect(page).toContain('Signed in as <strong>alice</strong>');
    expect(page).not.toContain(TOKENS.alice);
    // Behind a proxy that terminates https, the cookie is Secure.
    const secure = await new ConsoleClient(world.url).post(
      '/login',
      { token: TOKENS.alice },
      { 'x-forwarded-proto': 'https' },
    );
    expect(secure.headers.get('set-cookie')).toMatch(/; Secure$/);
  });
});

describe('inbox', () => {
  it('shows the unknown charge and the pending confirmation, with the counts of stats', async () => {
    const c = new ConsoleClient(world.url);
    await c.signIn(TOKENS.alice);
    const page = await c.html('/');
    const stats = await ledgerStats(pool, t.schema);
    const pending = await new ConfirmationStore(pool, t.schema).pending();
    expect(stats.unknown).toBe(1);
    expect(page).toContain(`<strong data-count="unknown">${stats.unknown}</strong>`);
    expect(page).toContain(`<strong data-count="pending-confirmations">${pending.count}</strong>`);
    expect(page).toContain(`<strong data-count="failed">${stats.byStatus.failed}</strong>`);
    expect(page).toContain(esc(world.unknownKey));
    expect(page).toContain(world.confirmation.id);
    expect(page).toContain('charge 250000 cents for order H-800');
    expect(page).not.toContain(CANARY);
    // carol sees the counts, but none of the demo's rows.
    const other = new ConsoleClient(world.url);
    await other.signIn(TOKENS.carol);
    const hers = await other.html('/');
    expect(hers).not.toContain(esc(world.unknownKey));
    expect(hers).not.toContain(world.confirmation.id);
    expect(hers).toMatch(/\d+ rows outside your namespaces are not shown/);
  });

  it('search finds the operation by task id, by operation key and by job id', async () => {
    const c = new ConsoleClient(world.url);
    await c.signIn(TOKENS.alice);
    const byTask = await c.html(`/search?q=task-43`);
    expect(byTask).toContain(esc(world.confirmation.operationKey));
    const record = await world.ledger.get(world.unknownKey);
    const byJob = await c.html(`/search?q=${encodeURIComponent(record?.jobId ?? '')}`);
    expect(byJob).toContain(esc(world.unknownKey));
    const byKey = await c.html(`/search?q=${encodeURIComponent(world.unknownKey)}`);
    expect(byKey).toContain('operation key');
  });
});

describe('refusals', () => {
  it('refuses a form without the anti-forgery token, with a wrong one, or from another origin', async () => {
    const c = new ConsoleClient(world.url);
    await c.signIn(TOKENS.alice);
    const page = await c.html(`/operation?key=${encodeURIComponent(world.unknownKey)}`);
    const { _csrf, _form } = ConsoleClient.fields(page);
    const form = { action: 'resolve-not-committed', key: world.unknownKey, reason: 'forged', _form };
    for (const [body, headers] of [
      [form, {}],
      [{ ...form, _csrf: `${_csrf.slice(0, -1)}${_csrf.endsWith('A') ? 'B' : 'A'}` }, {}],
      [{ ...form, _csrf }, { origin: 'http://evil.example' }],
      [{ ...form, _csrf }, { origin: '' }],
    ] as [Record<string, string>, Record<string, string>][]) {
      const res = await c.post('/action', body, headers);
      expect(res.status).toBe(403);
      expect(await res.text()).toContain('data-code="FORGED_REQUEST"');
    }
    expect((await world.ledger.get(world.unknownKey))?.status).toBe('unknown');
    expect(await events(`actor_id = 'alice' and reason_code like 'OPERATOR_%'`, [])).toEqual([]);
  });

  it('answers 403 to an operator outside the namespace, for the page and for an action', async () => {
    const c = new ConsoleClient(world.url);
    await c.signIn(TOKENS.carol);
    const key = encodeURIComponent(world.unknownKey);
    expect((await c.get(`/operation?key=${key}`)).status).toBe(403);
    const fields = ConsoleClient.fields(await c.html('/'));
    for (const form of [
      { action: 'resolve-not-committed', key: world.unknownKey },
      { action: 'answer', id: world.confirmation.id, decision: 'approve' },
    ]) {
      const res = await c.post('/action', {
        ...form,
        reason: 'not mine',
        ...fields,
        _form: `${fields._form}x${form.action.length}`,
      });
      expect(res.status).toBe(403);
      expect(await res.text()).toContain('data-code="NAMESPACE_NOT_ALLOWED"');
    }
    expect((await world.ledger.get(world.unknownKey))?.status).toBe('unknown');
    expect(await events(`actor_id = 'carol'`, [])).toEqual([]);
  });
});

describe('actions', () => {
  it('a double submit of a form records one answer and one resolution, under the signed-in operator', async () => {
    const c = new ConsoleClient(world.url);
    await c.signIn(TOKENS.alice);
    const key = world.confirmation.operationKey;
    const page = await c.html(`/operation?key=${encodeURIComponent(key)}`);
    const approve = {
      action: 'answer',
      id: world.confirmation.id,
      decision: 'approve',
      reason: 'invoice checked',
      actor: 'mallory',
      ...ConsoleClient.fields(page),
    };
    const [a, b] = await Promise.all([c.post('/action', approve), c.post('/action', approve)]);
    expect([a.status, b.status]).toEqual([303, 303]);
    expect((await c.post('/action', approve)).status).toBe(303);
    const answered = await events(`action = 'confirmation.answer' and resource_id = $1`, [world.confirmation.id]);
    expect(answered.map((e) => [e.actor_id, e.details.via])).toEqual([['alice', 'console']]);
    // The job wakes and charges once.
    await waitFor(
      async () => (await world.confirmQueue.getJobState(world.confirmJobId)) === 'completed',
      'the charge',
      60_000,
    );
    expect(world.ds.effectsFor({ order: 'H-800' })).toHaveLength(1);

    const unknownPage = await c.html(`/operation?key=${encodeURIComponent(world.unknownKey)}`);
    const resolve = {
      action: 'resolve-not-committed',
      key: world.unknownKey,
      reason: 'refunded by hand',
      ...ConsoleClient.fields(unknownPage),
    };
    const first = await c.post('/action', resolve);
    const second = await c.post('/action', resolve);
    expect([first.status, second.status]).toEqual([303, 303]);
    // The flash message after the redirect names the outcome.
    expect(await c.html(`/operation?key=${encodeURIComponent(world.unknownKey)}`)).toContain(
      'resolved as not committed',
    );
    // A new form (a second operator's click) is told it is no longer unknown.
    const again = await c.post('/action', { ...resolve, _form: `${resolve._form}2` });
    expect(again.status).toBe(409);
    const resolved = await events(`reason_code = 'OPERATOR_RESOLVED_NOT_COMMITTED' and resource_id = $1`, [
      world.unknownKey,
    ]);
    expect(resolved.map((e) => [e.actor_id, e.details.via])).toEqual([['alice', 'console']]);
    expect((await world.ledger.get(world.unknownKey))?.status).toBe('released');
  });
});
