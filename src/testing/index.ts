/**
 * `bullmq-idempotency/testing`: a commit-counting HTTP server to point processors at in tests and
 * demos (commit-counter.ts), its client (client.ts), the server in a child process (spawn.ts, cli.ts).
 */

export { main } from './cli.js';
export {
  EffectRequestError,
  EffectRequestError as DownstreamRequestError,
  type PostEffectResult,
  postEffect,
} from './client.js';
export {
  type CommitCounterOptions,
  type CommitCounterOptions as DownstreamOptions,
  CommitCountingServer,
  CommitCountingServer as Downstream,
  type Effect,
  type EffectMatch,
  FAIL_MODES,
  type FailMode,
  type Hold,
  type HoldGate,
  startCommitCounter,
  startCommitCounter as startDownstream,
} from './commit-counter.js';
export {
  type SpawnedCommitCounter,
  type SpawnedCommitCounter as SpawnedDownstream,
  spawnCommitCounter,
  spawnCommitCounter as spawnDownstream,
} from './spawn.js';
