/**
 * The operations process from a checkout (`npm start`), run from source: the same program as
 * `bullmq-idempotency start` (src/ops/run.ts), which deployments run on the built code.
 */
import { realpathSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { runOperationsProcess } from '../src/ops/run.js';

export { startOperationsProcess } from '../src/ops/operations-process.js';
export { EXIT } from '../src/ops/run.js';

function isEntryPoint(): boolean {
  const entry = process.argv[1];
  if (!entry) return false;
  try {
    return realpathSync(entry) === realpathSync(fileURLToPath(import.meta.url));
  } catch {
    return false;
  }
}

if (isEntryPoint()) process.exit(await runOperationsProcess());
