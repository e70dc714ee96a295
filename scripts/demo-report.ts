/** What `npm run demo` prints on stdout: the table, what it means, the audit side, the next steps. */
import type { AuditEvent } from '../src/index.js';
import { DEMO_TASK } from './demo-operation.js';

export type Row = { scenario: string; intents: number; commits: number; ledger: string; outcome: string };

export function table(rows: Row[]): string[] {
  const header: Row = { scenario: 'scenario', intents: 0, commits: 0, ledger: 'ledger', outcome: 'jobs' };
  const w = {
    scenario: Math.max(...rows.map((r) => r.scenario.length), 8),
    ledger: Math.max(...rows.map((r) => r.ledger.length), 6),
  };
  const line = (r: Row, head = false) =>
    `${r.scenario.padEnd(w.scenario)}  ${(head ? 'intents' : String(r.intents)).padStart(7)}  ${(head ? 'commits' : String(r.commits)).padStart(7)}  ${r.ledger.padEnd(w.ledger)}  ${r.outcome}`;
  return [line(header, true), '-'.repeat(w.scenario + w.ledger + 40), ...rows.map((r) => line(r))];
}

export const LEGEND = [
  'intents: operations meant to happen once · commits: charges the downstream counted ·',
  "ledger: the operation key's record in Postgres · jobs: how the BullMQ jobs of the scenario ended.",
  'epoch: the number of the attempt that holds a key, +1 on every claim after a release or a lease',
  '  taken over; the ledger refuses a write from an older epoch, so a worker that lost its lease can',
  '  record nothing.',
  '5 adds → 4 jobs: the two enqueue() calls derive one job id from the key, so BullMQ absorbed the',
  '  second; the three plain queue.add() calls made three more jobs. All four find one key: the first',
  '  to claim it runs, the others replay its recorded result.',
  'same key, changed amount: the original (700) is recorded first; the copy with 70000 carries the',
  '  same key (order D-400) but another input, so it is refused before it runs (IDEMPOTENCY_CONFLICT):',
  '  a changed intent needs a key of its own.',
];

export const TIMELINE_INTRO = [
  `The audit trail of ${DEMO_TASK}, the killed worker's charge (order E-500), as \`npm run cli -- timeline ${DEMO_TASK}\``,
  'prints it: the first attempt found the downstream down (released), the second committed and was',
  'killed, the third took the lease over and completed; a copy of the job replayed the result. Every',
  'attempt recorded its decision with ctx.audit() (tool.charge_card). system:backfill marks the events',
  'the backfill below restored.',
];

export const CONFIRMATION_INTRO = (id: string) => [
  `The large charge (order H-800) asked a person first with ctx.confirm(); the demo answered as an operator`,
  `would (\`${cliLine(`confirm ${id} --approve --reason "invoice checked" --actor ops-alice`).trim()}\`). Its trail:`,
];

/** An operation's stored events, one after the other: the action, and what decided it when that is not plain. */
export function trailLine(events: readonly AuditEvent[]): string {
  const steps = events
    .filter((e) => e.stepId === undefined)
    .map((e) => {
      const note =
        e.actorType === 'user'
          ? `${e.decision} by user:${e.actorId}`
          : e.decision !== 'allow'
            ? e.decision
            : (e.reasonCode ?? '');
      return note ? `${e.action} (${note})` : e.action;
    });
  // Wrapped at about 100 columns, each line indented, a continued one starting with the arrow.
  const lines: string[] = [];
  for (const step of steps) {
    const last = lines.at(-1);
    if (last !== undefined && last.length + step.length + 3 <= 100) lines[lines.length - 1] = `${last} → ${step}`;
    else lines.push(last === undefined ? `  ${step}` : `  → ${step}`);
  }
  return lines.join('\n');
}

export function cliLine(args: string): string {
  return `  npm run cli -- ${args}`;
}
