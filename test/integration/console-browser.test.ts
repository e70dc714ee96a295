/**
 * The console in a real browser (Debian's chromium, headless, driven by playwright-core) against
 * an operations process with data made by real workers: sign in with a scoped token, find the
 * unknown charge and the pending confirmation in the inbox, approve it and see the job charge
 * once, resolve the unknown one, and meet the refusals (403 outside the namespaces, a form
 * without its anti-forgery token). Screenshots of the inbox and of one operation are kept in
 * test-artifacts/.
 */
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type pg from 'pg';
import { type Browser, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CANARY, type ConsoleWorld, startConsoleWorld, TOKENS } from '../helpers/console-world.js';
import { TestContext, waitFor } from '../helpers/context.js';
import { machineHas } from '../helpers/machine.js';

const CHROMIUM = '/usr/bin/chromium';
const ready = machineHas(
  'test/integration/console-browser.test.ts',
  'chromium',
  existsSync(CHROMIUM),
  'apt-get install chromium',
);
const ARTIFACTS = join(process.cwd(), 'test-artifacts');

const t = new TestContext('console_browser');
let world: ConsoleWorld;
let pool: pg.Pool;
let browser: Browser;
/** Every page's HTML the browser was shown, to look for the canary in. */
const seen: string[] = [];

describe.runIf(ready)('the console in a browser', () => {
  beforeAll(async () => {
    mkdirSync(ARTIFACTS, { recursive: true });
    await t.setup();
    pool = t.pool(2);
    world = await startConsoleWorld(t);
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
  }, 180_000);

  afterAll(async () => {
    await browser?.close();
    await world?.close();
    await pool?.end();
    await t.teardown();
  }, 60_000);

  async function signedIn(token: string): Promise<Page> {
    const context = await browser.newContext({ viewport: { width: 1100, height: 900 } });
    const page = await context.newPage();
    page.on('response', async (r) => {
      if ((r.headers()['content-type'] ?? '').startsWith('text/html')) seen.push(await r.text().catch(() => ''));
    });
    await page.goto(world.url);
    expect(page.url()).toBe(`${world.url}/login`);
    await page.getByLabel('Operator token').fill(token);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForURL(world.url, { timeout: 5000 }).catch(async () => {
      throw new Error(`sign-in: ${page.url()} ${(await page.content()).slice(0, 3000)}`);
    });
    expect(page.url()).not.toContain(token);
    return page;
  }

  /** Posts a form built in the page (as a forged or hand-made form would be), and reads the answer. */
  async function submitForm(page: Page, fields: Record<string, string>): Promise<{ status: number; text: string }> {
    const [response] = await Promise.all([
      page.waitForResponse((r) => r.url().endsWith('/console/action')),
      page.evaluate((f) => {
        // biome-ignore lint/suspicious/noExplicitAny: runs in the page
        const doc = (globalThis as any).document;
        const form = doc.createElement('form');
        form.method = 'post';
        form.action = '/console/action';
        for (const [name, value] of Object.entries(f)) {
          const input = doc.createElement('input');
          input.type = 'hidden';
          input.name = name;
          input.value = value;
          form.appendChild(input);
        }
        doc.body.appendChild(form);
        form.submit();
      }, fields),
    ]);
    return { status: response.status(), text: await response.text() };
  }

  const auditOf = async (where: string, params: unknown[]) =>
    (
      await pool.query<{ actor_id: string; action: string }>(
        `select actor_id, action from ${t.schema}.audit_events where ${where}`,
        params,
      )
    ).rows;

  it('approves the pending charge, resolves the unknown one, and refuses what it must', async () => {
    const page = await signedIn(TOKENS.alice);
    await expect(page.getByRole('heading', { name: 'Inbox' }).isVisible()).resolves.toBe(true);
    const unknownRow = page.locator('section[aria-labelledby="unknown"]');
    expect(await unknownRow.textContent()).toContain(world.unknownKey);
    const pending = page.locator('section[aria-labelledby="confirmations"]');
    expect(await pending.textContent()).toContain(world.confirmation.id);
    expect(await page.locator('[data-count="unknown"]').textContent()).toBe('1');
    await page.screenshot({ path: join(ARTIFACTS, 'console-inbox.png'), fullPage: true });
    await page.setViewportSize({ width: 390, height: 844 });
    await page.screenshot({ path: join(ARTIFACTS, 'console-inbox-phone.png'), fullPage: true });
    await page.setViewportSize({ width: 1100, height: 900 });

    // Approve the large charge: the job wakes and charges once.
    const before = world.ds.effectsFor({ order: 'H-800' }).length;
    await pending.getByRole('link', { name: 'Review and answer' }).click();
    await page.getByLabel('Reason for your answer (kept in the audit trail)').fill('invoice checked');
    await page.getByRole('button', { name: 'Approve' }).click();
    await page.waitForURL(/\/console\/operation\?key=/);
    expect(await page.getByRole('status').textContent()).toContain(`${world.confirmation.id} approved`);
    await waitFor(
      async () => (await world.confirmQueue.getJobState(world.confirmJobId)) === 'completed',
      'the charge',
      60_000,
    );
    expect(before).toBe(0);
    expect(world.ds.effectsFor({ order: 'H-800' })).toHaveLength(1);
    await page.reload();
    expect(await page.locator('[data-status]').first().getAttribute('data-status')).toBe('completed');
    await page.screenshot({ path: join(ARTIFACTS, 'console-operation.png'), fullPage: true });

    // Resolve the unknown charge as committed, with the result the downstream holds (and a secret).
    const chargeId = world.ds.effectsFor({ order: 'C-300' })[0]?.id as string;
    await page.goto(`${world.url}/operation?key=${encodeURIComponent(world.unknownKey)}`);
    await page.getByLabel(/The result a replay returns/).fill(JSON.stringify({ chargeId, receiptToken: CANARY }));
    await page.locator('#reason-rc').fill('found at the provider');
    await page.getByRole('button', { name: 'Resolve as committed' }).click();
    await page.waitForURL(/\/console\/operation\?key=/);
    expect(await page.getByRole('status').textContent()).toContain('resolved as committed');
    expect(await page.locator('[data-status]').first().getAttribute('data-status')).toBe('completed');
    expect(await page.textContent('main')).toContain(chargeId);

    // A form without its anti-forgery token is refused, and changes nothing.
    const forged = await submitForm(page, {
      action: 'invalidate',
      key: world.unknownKey,
      reason: 'forged',
      _form: 'f'.repeat(22),
    });
    expect(forged.status).toBe(403);
    expect(forged.text).toContain('FORGED_REQUEST');
    expect((await world.ledger.get(world.unknownKey))?.status).toBe('completed');

    // carol's token covers acme/* only: the demo's operations are outside it.
    const carol = await signedIn(TOKENS.carol);
    const denied = await carol.goto(`${world.url}/operation?key=${encodeURIComponent(world.unknownKey)}`);
    expect(denied?.status()).toBe(403);
    await carol.goto(world.url);
    const _csrf = (await carol.locator('input[name="_csrf"]').first().getAttribute('value')) as string;
    const refused = await submitForm(carol, {
      action: 'invalidate',
      key: world.unknownKey,
      reason: 'not mine',
      _csrf,
      _form: 'c'.repeat(22),
    });
    expect(refused.status).toBe(403);
    expect(refused.text).toContain('NAMESPACE_NOT_ALLOWED');

    // Every action once in the trail, under the signed-in operator; none under carol.
    const answered = await auditOf(`action = 'confirmation.answer' and resource_id = $1`, [world.confirmation.id]);
    expect(answered).toEqual([{ actor_id: 'alice', action: 'confirmation.answer' }]);
    const resolved = await auditOf(`reason_code like 'OPERATOR_RESOLVED%' and resource_id = $1`, [world.unknownKey]);
    expect(resolved.map((e) => e.actor_id)).toEqual(['alice']);
    expect(await auditOf(`actor_id = 'carol'`, [])).toEqual([]);
    expect(await auditOf(`reason_code = 'OPERATOR_INVALIDATED'`, [])).toEqual([]);

    // No page shown so far holds the secret...
    expect(seen.length).toBeGreaterThan(5);
    expect(seen.filter((html) => html.includes(CANARY))).toEqual([]);
    // ...until alice opens the sealed result, with a reason, which the trail records.
    await page.goto(`${world.url}/operation?key=${encodeURIComponent(world.unknownKey)}`);
    await page.locator('#reason-op').fill('check the receipt');
    await page.getByRole('button', { name: 'Open sealed values' }).click();
    expect(await page.textContent('main')).toContain(CANARY);
    expect(page.url()).not.toContain(CANARY);
    const opened = await auditOf(`action = 'operator.decrypt' and resource_id = $1`, [world.unknownKey]);
    expect(opened.map((e) => e.actor_id)).toEqual(['alice']);
  }, 240_000);
});
