import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { createIdempotency } from '../../src/runtime/create-idempotency.js';
import { defaultLogger } from '../../src/runtime/default-logger.js';
import { chargeOperation } from '../fixtures/operations.js';
import { TestContext, waitFor } from '../helpers/context.js';
import { runtimePlace } from '../helpers/runtime.js';

/**
 * Without a logger of its own, a developer still sees what went wrong: outside production the
 * runtime writes warnings and errors to stderr, one readable line each, and hands that logger to
 * the wrapper of every worker it builds. In production it says nothing unless given a logger.
 */
const t = new TestContext('runtime_logger');

beforeAll(() => t.setup());
afterAll(() => t.teardown());
afterEach(() => {
  vi.restoreAllMocks();
});

describe('the default logger', () => {
  it('writes warnings and errors as one line each, errors by name and message; nothing below warn', () => {
    const lines: string[] = [];
    const logger = defaultLogger({ NODE_ENV: 'development' }, (l) => lines.push(l));

    logger.info({ jobId: '1' }, 'started');
    logger.debug({}, 'detail');
    logger.warn({ jobId: '7', err: new TypeError('bad\nvalue') }, 'attempt failed');
    logger.error({}, 'worker error');

    expect(lines).toEqual([
      'bullmq-idempotency warn: attempt failed {"jobId":"7","err":"TypeError: bad\\nvalue"}\n',
      'bullmq-idempotency error: worker error\n',
    ]);
  });

  it('says nothing in production', () => {
    const lines: string[] = [];
    const logger = defaultLogger({ NODE_ENV: 'production' }, (l) => lines.push(l));
    logger.warn({}, 'attempt failed');
    logger.error({}, 'worker error');
    expect(lines).toEqual([]);
  });

  it("is the runtime's when it is given none, and reaches the terminal from a worker's wrapper", async () => {
    const written = captureStderr();
    const idem = createIdempotency({ ...runtimePlace(t), audit: false });
    try {
      const charge = chargeOperation({ resourceKey: () => undefined });
      idem.worker(charge, async () => ({ ok: true }));
      // A job added without the helper, whose key cannot be derived: refused before any side effect.
      await idem.queue(charge).add('payments.charge', { order: 'o-1', amount: 5 });

      await waitFor(() => written.length > 0, 'a line on stderr');
      expect(written[0]).toMatch(/^bullmq-idempotency warn: .*IDEMPOTENCY_MISSING_KEY/);
    } finally {
      await idem.close();
    }
  });

  it('a downstream that does not resolve: the cause is in the terminal on the first failed attempt, sealed elsewhere', async () => {
    const written = captureStderr();
    const idem = createIdempotency({ ...runtimePlace(t), audit: false });
    try {
      const charge = chargeOperation({ queue: 'unresolvable' });
      idem.worker(charge, async (input, ctx) => {
        // .invalid never resolves (RFC 6761): no packet leaves the machine.
        const res = await fetch(`http://payments.invalid/charges/${input.order}`, { signal: ctx.signal });
        return { status: res.status };
      });
      const job = await idem.enqueue(charge, { order: 'o-dns', amount: 5 }, { jobOptions: { attempts: 1 } });
      await waitFor(
        async () => (await idem.queue(charge).getJobState(job.jobId)) === 'failed',
        'the only attempt to fail',
      );
      await waitFor(() => written.some((l) => l.includes('ENOTFOUND')), 'the cause on stderr');
      const failed = await idem.queue(charge).getJob(job.jobId);
      // BullMQ keeps the code, the class, the marker and how to open the sealed copy: not the text.
      expect(failed?.failedReason).not.toContain('payments.invalid');
      expect(failed?.failedReason).toMatch(/sealed message, \d+ bytes; open it/);
    } finally {
      await idem.close();
    }
  });
});

/** The runtime's lines on this process's stderr, kept (and not printed) for the test. */
function captureStderr(): string[] {
  const written: string[] = [];
  const write = process.stderr.write.bind(process.stderr);
  vi.spyOn(process.stderr, 'write').mockImplementation(((chunk: string | Uint8Array, ...rest: never[]) => {
    if (String(chunk).startsWith('bullmq-idempotency ')) {
      written.push(String(chunk));
      return true;
    }
    return write(chunk, ...rest);
  }) as typeof process.stderr.write);
  return written;
}
