#!/usr/bin/env node
/**
 * `bullmq-idempotency`: the operator's CLI (migrate, inspect, invalidate, resolve, timeline,
 * backfill, sweep, stats). Run `bullmq-idempotency --help`; exit codes are listed there and in
 * ./errors.ts.
 */
import { formatFailure } from '../config/failure.js';
import { describeFailure, EXIT } from './errors.js';
import { buildProgram } from './program.js';

/**
 * A reader that stops early (`| head`) closes the pipe: writes then fail with EPIPE, which Node
 * emits as an `error` event that would crash the process. The rest of the output is dropped
 * instead, and the command ends as it would have (its exit code unchanged).
 */
function dropOutputOnClosedPipe(): void {
  for (const stream of [process.stdout, process.stderr]) {
    stream.on('error', (err: NodeJS.ErrnoException) => {
      if (err.code === 'EPIPE' || err.code === 'ERR_STREAM_DESTROYED') return;
      process.exitCode = 1;
    });
  }
}

/** Parses and runs one command; returns the exit code (never throws). */
export async function run(argv: string[] = process.argv): Promise<number> {
  const program = buildProgram();
  try {
    await program.parseAsync(argv);
    return EXIT.ok;
  } catch (err) {
    // The schema the command was given (--schema wins over BQI_SCHEMA), named by a not-migrated error.
    const schema = program.opts<{ schema?: string }>().schema ?? (process.env.BQI_SCHEMA?.trim() || 'public');
    const failure = describeFailure(err, schema);
    if (failure.message) process.stderr.write(formatFailure(failure));
    return failure.exitCode;
  }
}

dropOutputOnClosedPipe();
const code = await run();
process.exitCode = code;
// Whatever a library left running (a reconnect timer...) must not keep a finished command alive.
setTimeout(() => process.exit(code), 2_000).unref();
