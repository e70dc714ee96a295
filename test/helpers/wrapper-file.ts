import { afterAll, afterEach, beforeAll } from 'vitest';
import type { PostgresLedger } from '../../src/ledger/postgres-ledger.js';
import { bull } from './bullmq.js';
import { TestContext } from './context.js';

type Closable = { close: () => Promise<unknown> };

/**
 * The fixtures of a test file that runs wrapped processors: its own schema and prefix, one ledger
 * for the file, and what each test opens (queues, workers, servers) closed after it, in reverse,
 * even when it failed half-way.
 */
export function wrapperFile(name: string) {
  const t = new TestContext(name);
  const b = bull(t);
  let ledger: PostgresLedger | undefined;
  const open: Closable[] = [];
  beforeAll(async () => {
    await t.setup();
    ledger = t.ledger();
  });
  afterEach(async () => {
    for (const c of open.splice(0).reverse()) await c.close();
  });
  afterAll(async () => {
    await ledger?.close();
    await t.teardown();
  });
  return {
    t,
    b,
    /** The file's ledger (made before the first test). */
    ledger: (): PostgresLedger => ledger as PostgresLedger,
    /** Closes `c` after the current test. */
    closeAfter: <C extends Closable>(c: C): C => {
      open.push(c);
      return c;
    },
  };
}
