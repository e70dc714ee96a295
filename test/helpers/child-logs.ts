import { waitFor } from './context.js';
import type { Collected } from './spawn.js';

/** A pino JSON line of a child process. */
export type LogLine = { level: number; msg: string; [k: string]: unknown };

/** The JSON log lines a child has written to stdout so far. */
export function logs(child: Collected): LogLine[] {
  return child.out
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as LogLine);
}

/** Waits for the child's first log line with message `msg` (its output is in the timeout error). */
export const waitForLog = (child: Collected, msg: string, timeoutMs = 30_000) =>
  waitFor(() => logs(child).find((l) => l.msg === msg), `log line "${msg}"\n${child.out}\n${child.err}`, timeoutMs, 50);
