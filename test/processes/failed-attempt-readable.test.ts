/**
 * A failed attempt stays readable where it happened, with nothing stored in clear: the `failed`
 * listener's error names the class and how to open the stored copy, `originalError()` returns the
 * processor's error in this process, and the logger gets one warn line on the first failed attempt
 * with the cause as the value scanners leave it. A downstream that does not resolve (`.invalid`
 * never does; no packet leaves the machine) and one that answers 500 with a secret in its body.
 */
import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { inspect } from 'node:util';
import type { Queue } from 'bullmq';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineKeyring } from '../../src/sealing/keyring.js';
import { originalError } from '../../src/sealing/original-error.js';
import type { Logger } from '../../src/shared/logger.js';
import { withIdempotency } from '../../src/worker/with-idempotency.js';
import { testOperation } from '../fixtures/operations.js';
import { settled } from '../helpers/bullmq.js';
import { waitFor } from '../helpers/context.js';
import { TEST_KEYRING_SPEC, testKeyring } from '../helpers/keyring.js';
import { childEnv, runTs } from '../helpers/spawn.js';
import { dumpPostgres, dumpRedis, plaintextFound } from '../helpers/stores.js';
import { wrapperFile } from '../helpers/wrapper-file.js';

const { t, b, ledger: fileLedger, closeAfter } = wrapperFile('failed_readable');

type Line = { level: string; obj: Record<string, unknown>; msg: string | undefined };
function captureLogger(): { logger: Logger; lines: Line[] } {
  const lines: Line[] = [];
  const at = (level: string) => (obj: object, msg?: string) => {
    lines.push({ level, obj: obj as Record<string, unknown>, msg });
  };
  return { logger: { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') }, lines };
}

function fetchOperation(name: string) {
  return testOperation({
    name,
    input: z.object({ id: z.string(), url: z.string() }),
    effect: (i) => ({ id: i.id }),
    resourceKey: (i) => `r:${i.id}`,
  });
}

describe('a failed attempt is readable where it ran', () => {
  it('a downstream that does not resolve: class and hint to listeners, the original in-process, the cause in the log', async () => {
    const keyring = defineKeyring({ keys: [{ id: 'k1', secret: randomBytes(32) }] });
    const { logger, lines } = captureLogger();
    const operation = fetchOperation('tour.fetch');
    const q: Queue = b.queue('tour');
    closeAfter(q);
    const w = b.worker(
      'tour',
      withIdempotency(
        operation,
        async (input) => {
          const res = await fetch(input.url);
          return { status: res.status };
        },
        { ledger: fileLedger(), keyring, logger, logErrorText: true },
      ),
    );
    closeAfter(w);
    const failed: Error[] = [];
    w.on('failed', (_job, err) => failed.push(err));

    const { jobId, idempotencyKey } = await operation.enqueue(
      q,
      { id: 'dns', url: 'http://nonexistent.invalid/' },
      { jobOptions: { attempts: 2, backoff: 10 } },
    );
    expect((await settled(q, jobId, 30_000)).state).toBe('failed');
    await waitFor(() => failed.length === 2, 'both failed attempts told');

    const first = failed[0] as Error;
    expect(first.message).toBe(
      `TypeError: sealed message, 12 bytes; open it with BQI_KEYRING set: npx bullmq-idempotency inspect '${idempotencyKey}' --decrypt --reason '<why>'`,
    );
    expect(first.name).toBe('TypeError');
    const original = originalError(first) as TypeError & { cause: { code?: string } };
    expect(original).toBeInstanceOf(TypeError);
    expect(original.message).toBe('fetch failed');
    expect(original.cause.code).toMatch(/^(ENOTFOUND|EAI_AGAIN)$/);

    const warned = lines.filter((l) => l.level === 'warn');
    expect(warned).toHaveLength(2);
    expect(warned[0]?.obj).toMatchObject({ attempt: 1, epoch: 1, key: idempotencyKey, class: 'TypeError' });
    expect(warned[0]?.msg).toMatch(
      /^attempt 1 failed: TypeError: fetch failed \[cause: .*(ENOTFOUND|EAI_AGAIN).*nonexistent\.invalid/,
    );
    expect(warned[0]?.msg).toContain(`inspect '${idempotencyKey}' --decrypt`);
    expect(warned[1]?.obj).toMatchObject({ attempt: 2, epoch: 2 });
    // The job data names the URL; what failed is sealed.
    expect(plaintextFound(await dumpRedis(t), ['fetch failed', 'ENOTFOUND', 'getaddrinfo'])).toEqual([]);
  });

  it('a downstream answering 500 with a secret: nothing of it in Postgres, Redis or the listener; scanned in the log', async () => {
    const keyring = testKeyring; // the CLI opens the stored copy with the same keys
    const apiKey = `sk_live_${randomBytes(12).toString('hex')}`;
    const email = `jo.${randomBytes(4).toString('hex')}@example.org`;
    const server: Server = createServer((_req, res) => {
      res.writeHead(500, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: `invalid api key ${apiKey}`, user: email }));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    closeAfter({ close: () => new Promise((resolve) => server.close(resolve)) });
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/charge`;
    const { logger, lines } = captureLogger();
    const operation = fetchOperation('http.500');
    const q: Queue = b.queue('http500');
    closeAfter(q);
    const w = b.worker(
      'http500',
      withIdempotency(
        operation,
        async (input) => {
          const res = await fetch(input.url);
          if (!res.ok) throw new Error(`downstream ${res.status}: ${await res.text()}`);
          return { ok: true };
        },
        { ledger: fileLedger(), keyring, logger, logErrorText: true },
      ),
    );
    closeAfter(w);
    const failed: Error[] = [];
    w.on('failed', (_job, err) => failed.push(err));

    const { jobId } = await operation.enqueue(q, { id: 'h500', url });
    expect((await settled(q, jobId)).state).toBe('failed');
    await waitFor(() => failed.length === 1, 'the failed attempt told');

    const secrets = [apiKey, email];
    expect(plaintextFound(await dumpPostgres(t), secrets)).toEqual([]);
    expect(plaintextFound(await dumpRedis(t), secrets)).toEqual([]);
    const err = failed[0] as Error;
    expect(
      plaintextFound(`${err.stack}\n${JSON.stringify(err)}\n${inspect(err, { showHidden: true })}`, secrets),
    ).toEqual([]);
    expect(String((originalError(err) as Error).message)).toContain(apiKey);
    const line = lines.find((l) => l.level === 'warn');
    expect(line?.msg).toContain('downstream 500');
    expect(line?.msg).toContain('[redacted:');
    // The hint is a command that works: with the keyring, the stored copy opens (audited).
    const hinted = /inspect '([^']+)' --decrypt --reason/.exec(err.message)?.[1] as string;
    const env = childEnv({ DATABASE_URL: t.databaseUrl, BQI_SCHEMA: t.schema, BQI_KEYRING: TEST_KEYRING_SPEC });
    const opened = await runTs(
      'src/cli/main.ts',
      ['inspect', hinted, '--decrypt', '--reason', 'a 500 in development'],
      env,
    );
    expect(opened.code, opened.stderr).toBe(0);
    expect(opened.stdout).toContain(`invalid api key ${apiKey}`);
    expect(plaintextFound(JSON.stringify(lines), secrets)).toEqual([]);
  });

  it('without logErrorText the warn line tells the code, class and hint only', async () => {
    const keyring = defineKeyring({ keys: [{ id: 'k1', secret: randomBytes(32) }] });
    const { logger, lines } = captureLogger();
    const secret = `word ${randomBytes(6).toString('hex')} nobody recognises`;
    const operation = fetchOperation('quiet.log');
    const q: Queue = b.queue('quiet');
    closeAfter(q);
    closeAfter(
      b.worker(
        'quiet',
        withIdempotency(
          operation,
          async () => {
            throw new RangeError(secret);
          },
          { ledger: fileLedger(), keyring, logger },
        ),
      ),
    );
    const { jobId, idempotencyKey } = await operation.enqueue(q, { id: 'q', url: 'x' });
    expect((await settled(q, jobId)).state).toBe('failed');
    await waitFor(() => lines.some((l) => l.level === 'warn'), 'the warn line');
    const line = lines.find((l) => l.level === 'warn');
    expect(line?.msg).toMatch(
      /^attempt 1 failed: RangeError: sealed message, \d+ bytes; open it with BQI_KEYRING set: /,
    );
    expect(line?.obj).toMatchObject({ code: 'RangeError', key: idempotencyKey, epoch: 1, attempt: 1 });
    expect(plaintextFound(JSON.stringify(lines), [secret])).toEqual([]);
  });
});
