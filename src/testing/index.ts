/**
 * `bullmq-idempotency/testing`: a commit-counting HTTP server to point processors at in tests and
 * demos (commit-counter.ts), its client (client.ts), the server in a child process (spawn.ts, cli.ts).
 */

export { main } from './cli.js';
export { EffectRequestError, type PostEffectResult, postEffect } from './client.js';
export {
  type CommitCounterOptions,
  CommitCountingServer,
  type Effect,
  type EffectMatch,
  FAIL_MODES,
  type FailMode,
  type Hold,
  type HoldGate,
  startCommitCounter,
} from './commit-counter.js';
export { type SpawnedCommitCounter, spawnCommitCounter } from './spawn.js';
