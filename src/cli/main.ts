#!/usr/bin/env node
/**
 * `bullmq-idempotency`: the operator's CLI (migrate, inspect, invalidate, resolve, timeline,
 * backfill, sweep, stats). Run `bullmq-idempotency --help`; exit codes are listed there and in
 * ./errors.ts.
 */
import { describeFailure, EXIT } from './errors.js';
import { buildProgram } from './program.js';

/** Parses and runs one command; returns the exit code (never throws). */
export async function run(argv: string[] = process.argv): Promise<number> {
  const program = buildProgram();
  try {
    await program.parseAsync(argv);
    return EXIT.ok;
  } catch (err) {
    const { exitCode, message } = describeFailure(err, process.env.BQI_SCHEMA?.trim() || 'public');
    if (message) process.stderr.write(`${message.startsWith('error:') ? message : `error: ${message}`}\n`);
    return exitCode;
  }
}

const code = await run();
process.exitCode = code;
// Whatever a library left running (a reconnect timer...) must not keep a finished command alive.
setTimeout(() => process.exit(code), 2_000).unref();
