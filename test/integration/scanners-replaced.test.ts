import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { receiptSql } from '../../src/audit/receipts-sql.js';
import { DEFAULT_REDACTION_POLICY, redactString } from '../../src/redaction/index.js';
import { runtimeAuditPolicy } from '../../src/runtime/audit-policy.js';
import { createIdempotency } from '../../src/runtime/create-idempotency.js';
import { scannedLogger, type ValueScanner } from '../../src/scanners/index.js';
import { pinoRedactionOptions } from '../../src/scanners/pino/pino.js';
import type { Logger } from '../../src/shared/logger.js';
import { chargeOperation } from '../fixtures/operations.js';
import { TestContext, waitFor } from '../helpers/context.js';
import { TEST_KEYRING_SPEC, testKeyring } from '../helpers/keyring.js';
import { capturePino } from '../helpers/pino-capture.js';

/**
 * The value scanners are one interface, `ValueScanner`, which `createIdempotency({ valueScanner })`
 * replaces: the audit trail's policy scans every string it keeps with it (and no longer with the
 * built-in scanners), and every line the runtime logs passes through it. Without the option, the
 * built-in scanners do as before.
 */
const t = new TestContext('scanners_replaced');

beforeAll(() => t.setup());
afterAll(() => t.teardown());

const NOTE = 'ticket ACME-12345678 for jane@example.com';

/** Finds ACME ticket numbers, nothing else; counts the texts it is given. */
function acmeScanner(): ValueScanner & { texts: number } {
  const scanner = {
    texts: 0,
    scan(text: string, hits: { hit(rule: string): void }): string {
      scanner.texts++;
      return text.replace(/ACME-[0-9]{8}/g, () => {
        hits.hit('acme_ticket');
        return '[redacted:acme_ticket]';
      });
    },
  };
  return scanner;
}

type Line = { level: string; obj: Record<string, unknown>; msg: string | undefined };

function captureLogger(): Logger & { lines: Line[] } {
  const lines: Line[] = [];
  const at = (level: string) => (obj: object, msg?: string) => {
    lines.push({ level, obj: obj as Record<string, unknown>, msg });
  };
  return { lines, debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') };
}

/** Runs one job that audits a note and fails with the ticket in its message; the note as stored, and the log. */
async function run(name: string, valueScanner: ValueScanner | undefined) {
  const logger = captureLogger();
  const idem = createIdempotency({
    postgres: t.databaseUrl,
    schema: t.schema,
    redis: t.redisUrl,
    prefix: t.prefix,
    keyring: TEST_KEYRING_SPEC,
    audit: {
      writer: true,
      queue: `${name}-audit`,
      redaction: { version: 'notes-1', details: { 'tool.note': ['note'] } },
    },
    logger,
    logErrorText: true,
    ...(valueScanner ? { valueScanner } : {}),
  });
  try {
    const charge = chargeOperation({ queue: name });
    idem.worker(charge, async (_input, ctx) => {
      ctx.audit({ action: 'tool.note', decision: 'allow', details: { note: NOTE } });
      throw new Error('refused: ACME-87654321');
    });
    const job = await idem.enqueue(charge, { order: `o-${name}`, amount: 5 }, { jobOptions: { attempts: 1 } });
    await waitFor(async () => (await idem.queue(charge).getJobState(job.jobId)) === 'failed', 'the attempt to fail');
    await idem.flush();
    const stored = async () =>
      (
        await t.query(
          `select e.details, ${receiptSql(t.schema, 'e')} as redaction from ${t.schema}.audit_events e where e.action = 'tool.note' and e.job_id = $1`,
          [job.jobId],
        )
      ).rows[0] as { details: { note: string }; redaction: { rules: string[] } } | undefined;
    await waitFor(async () => (await stored()) !== undefined, 'the note in the trail');
    await waitFor(() => logger.lines.some((l) => l.level === 'warn'), 'the failed attempt logged');
    return { stored: (await stored())!, warn: logger.lines.find((l) => l.level === 'warn')! };
  } finally {
    await idem.close();
  }
}

describe('a value scanner given to createIdempotency', () => {
  it('is what the audit trail scans with, in place of the built-in scanners, and what the log lines pass through', async () => {
    const acme = acmeScanner();
    const { stored, warn } = await run('replaced', acme);

    // The trail: the ticket replaced and told in the receipt; the e-mail, which only the built-in
    // scanners would mask, kept (the built-in scanners did not run).
    expect(stored.details.note).toBe('ticket [redacted:acme_ticket] for jane@example.com');
    expect(stored.redaction.rules).toContain('scan.acme_ticket');
    // The log: the failed attempt's line tells the error's text through the same scanner.
    expect(warn.msg).toContain('refused: [redacted:acme_ticket]');
    expect(JSON.stringify(warn)).not.toContain('ACME-87654321');
    expect(warn.obj.error).toContain('[redacted:acme_ticket]');
    expect(acme.texts).toBeGreaterThan(2);
  });

  it('left out, the built-in scanners do as before and log lines are handed on as written', async () => {
    const { stored, warn } = await run('builtin', undefined);

    expect(stored.details.note).toBe('ticket ACME-12345678 for j***@example.com');
    expect(stored.redaction.rules).toContain('scan.email');
    expect(stored.redaction.rules).not.toContain('scan.acme_ticket');
    expect(warn.msg).toContain('refused: ACME-87654321');
  });
});

describe('a replacing value scanner, without a runtime', () => {
  it('scans the lines of a pino logger of yours given as pinoRedactionOptions(policy, { valueScanner })', () => {
    const { logger, lines } = capturePino(
      pinoRedactionOptions(DEFAULT_REDACTION_POLICY, { valueScanner: acmeScanner() }),
    );
    logger.info({ note: NOTE }, 'about ACME-11112222');
    const line = JSON.parse(lines()) as { note: string; msg: string };
    expect(line).toMatchObject({
      note: 'ticket [redacted:acme_ticket] for jane@example.com',
      msg: 'about [redacted:acme_ticket]',
    });
  });

  it('one that throws or returns no string loses the text, never the line or the event', () => {
    const throwing: ValueScanner = {
      scan(text) {
        if (text.includes('boom')) throw new Error('scanner failed');
        return text;
      },
    };
    const policy = runtimeAuditPolicy(testKeyring, undefined, throwing);
    expect(policy.scanners).toEqual(['value_scanner']);
    expect(redactString('a boom here', policy)).toBe('[redacted:value_scanner]');
    expect(redactString('all quiet', policy)).toBe('all quiet');
    const lines: Line[] = [];
    const logger = scannedLogger(
      {
        ...captureLogger(),
        warn: (obj, msg) => lines.push({ level: 'warn', obj: obj as Record<string, unknown>, msg }),
      },
      { scan: () => undefined as unknown as string },
    );
    logger.warn({ code: 'X', nested: [{ text: 'secret' }] }, 'message');
    expect(lines).toEqual([
      {
        level: 'warn',
        obj: { code: '[redacted:value_scanner]', nested: [{ text: '[redacted:value_scanner]' }] },
        msg: '[redacted:value_scanner]',
      },
    ]);
  });
});
