/**
 * The commit-counting server as a process:
 * `npx tsx src/testing/cli.ts [--no-idempotency] [--port N] [--delay-ms N]` prints one JSON line
 * `{"url":"http://127.0.0.1:PORT"}` on stdout and closes on SIGTERM/SIGINT (or, with
 * COMMIT_COUNTER_EXIT_ON_STDIN_END=1, when its stdin ends). `spawnCommitCounter()` runs it.
 */
import { realpathSync } from 'node:fs';
import { resolve as resolvePath } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type CommitCounterOptions, type CommitCountingServer, startCommitCounter } from './commit-counter.js';

/** Parses the arguments, starts the server and prints its URL. */
export async function main(argv: readonly string[] = process.argv.slice(2)): Promise<CommitCountingServer> {
  const options: CommitCounterOptions = {};
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '--no-idempotency') options.honourIdempotencyKey = false;
    else if (arg === '--port') options.port = Number(argv[++i]);
    else if (arg === '--delay-ms') options.delayMs = Number(argv[++i]);
    else throw new Error(`unknown argument ${arg}`);
  }
  const server = await startCommitCounter(options);
  const stop = () => {
    server.close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
  if (process.env.COMMIT_COUNTER_EXIT_ON_STDIN_END === '1') {
    process.stdin.once('end', stop).once('close', stop).resume();
  }
  process.stdout.write(`${JSON.stringify({ url: server.url })}\n`);
  return server;
}

function isMain(): boolean {
  const entry = process.argv[1];
  if (!entry) return false;
  try {
    return realpathSync(resolvePath(entry)) === realpathSync(fileURLToPath(import.meta.url));
  } catch {
    return false;
  }
}

if (isMain()) {
  main().catch((err: unknown) => {
    console.error(err);
    process.exit(1);
  });
}
