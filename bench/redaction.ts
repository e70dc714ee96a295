/**
 * Redaction throughput: how many realistic audit events per second `redact` handles on one core.
 *
 * Generates BENCH_EVENTS (default 100,000) nested events of about 1 KB each (ids, UUIDs,
 * timestamps, amounts, prose, nested tool inputs, a short conversation; customer ids drawn from a
 * pool of 5,000, as one tenant's events concern a bounded set of customers), with secrets and
 * personal data sprinkled into a few percent of them (an API key in a note, an e-mail in prose,
 * a card number, a JWT, a password field). Generation is not timed. Each round redacts every
 * event once with a policy that has a configured HMAC key; the first round warms the JIT and is
 * reported but not used for the median. The rate is events per CPU second of this process
 * (`process.cpuUsage`, so one core's worth of work, and robust to other processes competing for
 * the cores); the wall-clock rate is printed next to it.
 *
 * It also checks, outside the timing, that every sprinkled secret was removed (a correctness
 * check, so a fast but broken build cannot report a number).
 *
 * This machine's speed moves from minute to minute (the same code has measured 28k and 57k
 * events/s here). So each round also times a reference workload on the same events, right after
 * the redaction: each event's JSON and an HMAC-SHA-256 of it, with the policy's key (native work
 * of the kind redaction does, not a floor of it: a redactor must also read every text). The rate
 * is printed beside redaction's, with the median of the per-round ratios: a change of code moves
 * the ratio, a change of host mostly does not.
 *
 * Run: `npx tsx bench/redaction.ts` (BENCH_EVENTS, BENCH_ROUNDS). The last line of stdout is one
 * JSON object.
 */
import { createHmac } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { defineRedactionPolicy, redact } from '../src/redaction/index.js';
import { jsonLine } from './lib/json-line.js';
import { median } from './lib/stats.js';
import { printTable } from './lib/table.js';

const EVENTS = Number(process.env.BENCH_EVENTS ?? 100_000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);

/** Deterministic PRNG, so every run redacts the same events. */
function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const random = mulberry32(42);
const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!;
const hex = (n: number) => Array.from({ length: n }, () => Math.floor(random() * 16).toString(16)).join('');
const base62 = (n: number) =>
  Array.from(
    { length: n },
    () => 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789'[Math.floor(random() * 62)],
  ).join('');
const uuid = () => `${hex(8)}-${hex(4)}-4${hex(3)}-a${hex(3)}-${hex(12)}`;

const WORDS =
  'the agent checked the invoice against the purchase order and found a mismatch in the shipping line so it asked the finance team to confirm before charging the customer again after the retry window closed'.split(
    ' ',
  );
const prose = (words: number) => Array.from({ length: words }, () => pick(WORDS)).join(' ');
/** Events of one tenant concern a bounded set of customers; their ids recur across events. */
const CUSTOMERS = Array.from({ length: 5_000 }, () => `cus_${base62(14)}`);
const ACTIONS = ['payments.charge', 'crm.update_contact', 'assets.create', 'email.send', 'tickets.comment'];
const TOOLS = ['stripe.charge', 'hubspot.patch', 's3.put_object', 'sendgrid.send', 'zendesk.comment'];

/** Secrets and personal data sprinkled into some events; `apply` returns what must not survive. */
const SPRINKLES: { chance: number; apply: (e: Event) => string }[] = [
  { chance: 0.03, apply: (e) => addNote(e, `sk_live_${base62(24)}`, (s) => `retrying with key ${s}`) },
  {
    chance: 0.03,
    apply: (e) =>
      addNote(e, `${pick(['anna', 'li', 'omar'])}.${hex(6)}`, (s) => `customer wrote from ${s}@mail.example.com`),
  },
  { chance: 0.02, apply: (e) => addNote(e, '4539 8073 9823', (s) => `card on file ${s} 7388 was declined`) },
  {
    chance: 0.02,
    apply: (e) =>
      addNote(e, base62(43), (s) => `Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIx${base62(20)}.${s}`),
  },
  {
    chance: 0.03,
    apply: (e) => {
      e.details.tool.input.password = `pw-${base62(12)}`;
      return e.details.tool.input.password;
    },
  },
  {
    chance: 0.02,
    apply: (e) => addNote(e, `7946 ${1000 + Math.floor(random() * 8999)}`, (s) => `call back on +44 20 ${s}`),
  },
];

type Event = ReturnType<typeof makeEvent>;

/** Adds a note built around `secret` and returns the secret. */
function addNote(e: Event, secret: string, note: (s: string) => string): string {
  e.details.tool.input.notes.push(note(secret));
  return secret;
}

function makeEvent(i: number) {
  const action = pick(ACTIONS);
  const createdAt = new Date(1_750_000_000_000 + i * 1000).toISOString();
  return {
    eventId: uuid(),
    taskId: `task:${1000 + i}`,
    stepId: `step-${i % 7}`,
    operationId: `op_${hex(16)}`,
    actorType: pick(['agent', 'system', 'user'] as const),
    actorId: `agent-${i % 13}`,
    action,
    resourceType: pick(['invoice', 'contact', 'asset', 'ticket']),
    resourceId: `res_${hex(12)}`,
    decision: pick(['allow', 'deny', 'pending_confirmation'] as const),
    reasonCode: pick(['policy.ok', 'policy.limit', 'human.required']),
    createdAt,
    attempt: 1 + (i % 3),
    jobId: `${i}`,
    queue: 'agent-actions',
    epoch: 1 + (i % 2),
    details: {
      amount: Math.round(random() * 1_000_000) / 100,
      currency: pick(['EUR', 'USD', 'GBP']),
      summary: prose(18),
      tool: {
        name: pick(TOOLS),
        input: {
          orderId: `ord_${i}`,
          customerId: pick(CUSTOMERS),
          sku: `SKU-${hex(6).toUpperCase()}`,
          quantity: 1 + (i % 5),
          dueDate: createdAt.slice(0, 10),
          digest: hex(64),
          tags: ['priority', pick(['eu', 'us', 'apac'])],
          notes: [prose(12)] as string[],
          password: undefined as string | undefined,
        },
      },
      messages: [
        { role: 'user', content: prose(20) },
        { role: 'assistant', content: prose(16) },
      ],
    },
    result: { status: 'succeeded', externalId: `ch_${base62(18)}`, latencyMs: Math.floor(random() * 900) },
  };
}

function generate(): { events: Event[]; planted: string[][] } {
  const events: Event[] = [];
  const planted: string[][] = [];
  for (let i = 0; i < EVENTS; i++) {
    const e = makeEvent(i);
    const secrets: string[] = [];
    for (const s of SPRINKLES) if (random() < s.chance) secrets.push(s.apply(e));
    if (e.details.tool.input.password === undefined) delete (e.details.tool.input as { password?: string }).password;
    events.push(e);
    planted.push(secrets);
  }
  return { events, planted };
}

/** The policy's HMAC key, also the reference workload's (below). */
const HMAC_SECRET = 'bench-hmac-key-0123456789abcdef0123456789abcdef';

const policy = defineRedactionPolicy({
  version: 'bench-1',
  hmacKeys: [{ id: 'bench', secret: HMAC_SECRET }],
});

const t0 = performance.now();
const { events, planted } = generate();
const genMs = performance.now() - t0;
const avgBytes = Math.round(events.reduce((n, e) => n + JSON.stringify(e).length, 0) / events.length);

// Correctness first: every planted secret must be gone from the redacted JSON.
let leaks = 0;
let hits = 0;
for (let i = 0; i < events.length; i++) {
  const { value, receipt } = redact(events[i], policy);
  const json = JSON.stringify(value);
  hits += receipt.rules.length > 0 ? 1 : 0;
  for (const s of planted[i]!) if (json.includes(s)) leaks++;
}
if (leaks > 0) throw new Error(`redaction left ${leaks} planted secrets in the output`);

const rows: string[][] = [];
const rates: number[] = [];
const wallRates: number[] = [];
const referenceRates: number[] = [];
const ratios: number[] = [];
let sink = 0;

/** Events per CPU second of the reference workload: each event's JSON and its HMAC. */
function referenceRate(): number {
  const cpu0 = process.cpuUsage();
  for (const e of events)
    sink += createHmac('sha256', HMAC_SECRET).update(JSON.stringify(e)).digest('base64url').length;
  const cpu = process.cpuUsage(cpu0);
  return (events.length / ((cpu.user + cpu.system) / 1000)) * 1000;
}

for (let round = 0; round <= ROUNDS; round++) {
  const cpu0 = process.cpuUsage();
  const start = performance.now();
  for (const e of events) sink += redact(e, policy).receipt.paths.length;
  const ms = performance.now() - start;
  const cpu = process.cpuUsage(cpu0);
  const cpuMs = (cpu.user + cpu.system) / 1000;
  const rate = (events.length / cpuMs) * 1000;
  const wallRate = (events.length / ms) * 1000;
  const reference = referenceRate();
  if (round > 0) {
    rates.push(rate);
    wallRates.push(wallRate);
    referenceRates.push(reference);
    ratios.push(rate / reference);
  }
  rows.push([
    round === 0 ? 'warm-up' : String(round),
    ms.toFixed(0),
    cpuMs.toFixed(0),
    Math.round(wallRate).toLocaleString('en-US'),
    Math.round(rate).toLocaleString('en-US'),
    ((avgBytes * rate) / 1e6).toFixed(1),
    Math.round(reference).toLocaleString('en-US'),
    (rate / reference).toFixed(3),
  ]);
}
const cpuMedian = median(rates);
const wallMedian = median(wallRates);

console.log(
  `events: ${events.length.toLocaleString('en-US')}, ~${avgBytes} bytes of JSON each, generated in ${genMs.toFixed(0)} ms`,
);
console.log(`events with at least one redaction: ${hits.toLocaleString('en-US')}; planted secrets left: ${leaks}`);
const header = [
  'round',
  'wall ms',
  'cpu ms',
  'events/s (wall)',
  'events/s (cpu)',
  'MB/s (cpu)',
  'reference events/s (cpu)',
  'redaction ÷ reference',
];
printTable(header, rows, { allRight: true });
console.log(
  `median events/s per CPU second: ${Math.round(cpuMedian).toLocaleString('en-US')}; by wall clock: ${Math.round(wallMedian).toLocaleString('en-US')} (${sink > 0 ? 'ok' : 'no hits'})`,
);
console.log(
  `reference (JSON and HMAC of each event), median events/s per CPU second: ${Math.round(median(referenceRates)).toLocaleString('en-US')}; redaction ÷ reference, median of rounds: ${median(ratios).toFixed(3)}`,
);
jsonLine('redaction', {
  redaction_per_s: Math.round(cpuMedian),
  redaction_per_s_wall: Math.round(wallMedian),
  reference_per_s: Math.round(median(referenceRates)),
  redaction_vs_reference: Number(median(ratios).toFixed(3)),
  events: events.length,
  avg_event_bytes: avgBytes,
});
