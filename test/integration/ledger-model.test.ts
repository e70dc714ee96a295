/**
 * The ledger against a model: fast-check generates sequences of claims (two inputs per key),
 * heartbeats, completions, failures (terminal and retryable), releases, moves to unknown,
 * invalidations, resolutions (committed or not) and the passing of time, and runs each against a
 * plain in-memory model of the state machine (written from the design's diagram, not from the
 * transition table) and against the real ledger on Postgres. After every command the row's
 * status and epoch, the outcome of the call, and the record of transitions (every transition of
 * every epoch, in order) must agree; and the events the backfill derives from that record are one
 * per transition, of the transition's event type, under distinct ids; the event the worker's
 * dispatch of a claim reports is the one derived from the record.
 *
 * Time: the database clock, moved on by the ledger's test-only clock offset (`clockOffsetMs`,
 * added to `now()` in every statement). "Advance" moves it 31 s (past the 30 s lease) or 61 s
 * (past the 60 s retention too); a run is far shorter than 29 s of wall time, so no lease or
 * retention boundary depends on how fast the machine is.
 */
import type { Job } from 'bullmq';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AuditEvent, eventIdFor } from '../../src/audit/audit-event.js';
import { eventsForRecord } from '../../src/audit/derive.js';
import { auditEventFromWrapper, LEDGER_TRANSITIONS } from '../../src/audit/from-wrapper.js';
import { IllegalTransitionError, RecordLostError, StaleEpochError } from '../../src/errors/errors.js';
import { boundedKey } from '../../src/keys/idempotency-key.js';
import { PostgresLedger } from '../../src/ledger/postgres-ledger.js';
import { TRANSITION_NAMES } from '../../src/ledger/transitions.js';
import type { ClaimOutcome, Downstream, LedgerStatus, Transition } from '../../src/ledger/types.js';
import type { WrapperEvent } from '../../src/shared/wrapper-event.js';
import { decideClaim } from '../../src/worker/claim.js';
import { AttemptEvents } from '../../src/worker/record.js';
import type { AttemptScope } from '../../src/worker/types.js';
import { TestContext } from '../helpers/context.js';
import { payClaim } from '../helpers/ledger-claims.js';

const t = new TestContext('ledger_model');
let pool: ReturnType<TestContext['pool']>;
const LEASE_MS = 30_000;
const RETENTION_MS = 60_000;
/** One key per downstream: a takeover of an expired lease moves on, or becomes unknown. */
const DOWNSTREAMS: readonly Downstream[] = ['idempotent', 'none'];
let run = 0;

beforeAll(async () => {
  await t.setup();
  pool = t.pool(4);
});
afterAll(async () => {
  await pool.end();
  await t.teardown();
});

// ---- the model -----------------------------------------------------------------------------

type Row = {
  status: LedgerStatus;
  epoch: number;
  input: number;
  /** Model times (ms of the clock offset) when the lease and the retention run out. */
  leaseUntil: number | null;
  expiresAt: number | null;
};
type Model = {
  now: number;
  rows: (Row | undefined)[];
  /** Every transition of every key, in order: what the ledger's record must hold. */
  transitions: [Transition, number][][];
};

/** What a call returned, as the model and the ledger both can tell it. */
type Outcome = string;

/** The event type of each transition, as the design names them. */
const EVENT_OF: Record<Transition, string> = {
  claimed: 'claimed',
  takeover: 'takeover',
  takeover_unknown: 'unknown',
  reclaimed: 'claimed',
  reclaimed_after_expiry: 'claimed',
  reclaimed_after_invalidation: 'claimed',
  completed: 'completed',
  failed: 'failed',
  failed_retryable: 'released',
  released: 'released',
  marked_unknown: 'unknown',
  invalidated: 'invalidated',
  resolved_committed: 'resolved',
  resolved_not_committed: 'resolved',
  record_lost: 'unknown',
};

/** Transitions and outcomes met across all runs: the generated sequences must reach each. */
const seen = new Set<string>();
let commandsRun = 0;
/** Races of a batched and a single claim of a key that had no row. */
let racesOnNewKeys = 0;

function record(m: Model, k: number, row: Row, transition: Transition): void {
  m.rows[k] = row;
  (m.transitions[k] as [Transition, number][]).push([transition, row.epoch]);
}

/** The model's claim: the design's diagram, case by case. */
function modelClaim(m: Model, k: number, input: number): Outcome {
  const row = m.rows[k];
  const acquire = (transition: Transition, epoch: number): Outcome => {
    record(m, k, { status: 'locked', epoch, input, leaseUntil: m.now + LEASE_MS, expiresAt: null }, transition);
    return `acquired:${transition}`;
  };
  if (!row) return acquire('claimed', 1);
  const same = row.input === input;
  switch (row.status) {
    case 'invalidated':
      return acquire('reclaimed_after_invalidation', row.epoch + 1);
    case 'released':
      return same ? acquire('reclaimed', row.epoch + 1) : 'conflict';
    case 'completed':
    case 'failed':
      if ((row.expiresAt as number) <= m.now) return acquire('reclaimed_after_expiry', row.epoch + 1);
      return same ? row.status : 'conflict';
    case 'locked':
      if (!same) return 'conflict';
      if ((row.leaseUntil as number) > m.now) return 'inProgress';
      if (DOWNSTREAMS[k] === 'none') {
        const epoch = row.epoch + 1;
        record(m, k, { status: 'unknown', epoch, input, leaseUntil: null, expiresAt: null }, 'takeover_unknown');
        return 'unknown:transitioned';
      }
      return acquire('takeover', row.epoch + 1);
    case 'unknown':
      return same ? 'unknown' : 'conflict';
  }
}

/** A write fenced by the epoch: only the holder of the current epoch of a locked row may make it. */
function modelFenced(m: Model, k: number, epoch: number, apply: (row: Row) => Transition | undefined): Outcome {
  const row = m.rows[k];
  // No row where the writer held an epoch: the record was lost (here: never claimed, or deleted).
  if (!row) return 'lost';
  if (row.status !== 'locked' || row.epoch !== epoch) {
    return row && row.epoch === epoch ? 'illegal' : 'stale';
  }
  const transition = apply(row);
  if (transition) (m.transitions[k] as [Transition, number][]).push([transition, row.epoch]);
  return 'ok';
}

// ---- the real ledger -----------------------------------------------------------------------

type Real = {
  /** The keys of this run (fresh per run, so runs never meet). */
  keys: string[];
  resourceKeys: string[];
  /** One ledger per clock offset, all on one pool (claims batched). */
  ledgerAt: (now: number) => PostgresLedger;
  /** A second ledger per clock offset that sends one statement per call (a concurrent single claimer). */
  singleAt: (now: number) => PostgresLedger;
  /** New keys claimed in the same batch as a raced key, each claimed once. */
  companions: number;
};

function outcomeOf(c: ClaimOutcome): Outcome {
  switch (c.kind) {
    case 'acquired':
      return `acquired:${c.transition}`;
    case 'unknown':
      return c.transitioned ? 'unknown:transitioned' : 'unknown';
    default:
      return c.kind;
  }
}

async function fencedOutcome(write: () => Promise<unknown>): Promise<Outcome> {
  try {
    await write();
    return 'ok';
  } catch (err) {
    if (err instanceof StaleEpochError) return 'stale';
    if (err instanceof RecordLostError) return 'lost';
    if (err instanceof IllegalTransitionError) return 'illegal';
    throw err;
  }
}

/** After every command: the row, the outcome, the record of transitions and the events derived from it agree. */
async function compare(m: Model, r: Real, k: number, expected: Outcome, actual: Outcome): Promise<void> {
  expect(actual).toBe(expected);
  commandsRun++;
  seen.add(actual);
  const rec = await r.ledgerAt(m.now).get(r.keys[k] as string);
  const row = m.rows[k];
  expect(rec === null ? null : { status: rec.status, epoch: rec.epoch }).toEqual(
    row ? { status: row.status, epoch: row.epoch } : null,
  );
  if (!rec) return;
  const want = m.transitions[k] as [Transition, number][];
  for (const [tr] of want) seen.add(tr);
  expect((rec.transitions ?? []).map((x) => [x.transition, x.epoch])).toEqual(want);
  const events = eventsForRecord(rec);
  expect(events.map((e) => [e.action, e.epoch])).toEqual(want.map(([tr, e]) => [`idempotency.${EVENT_OF[tr]}`, e]));
  expect(events.map((e) => e.eventId)).toEqual(
    want.map(([tr, e]) => eventIdFor(rec.key, e, EVENT_OF[tr], rec.stepId ?? undefined)),
  );
  expect(new Set(events.map((e) => e.eventId)).size).toBe(events.length);
}

/**
 * The worker's dispatch of a claim's outcome (`decideClaim`) reports the event the backfill
 * derives from the ledger's record: a claim that made a transition, its event exactly (id,
 * action, decision, reason, database time); a claim that found a recorded failure or an unknown
 * outcome, the id of the event of the transition that recorded it.
 */
async function compareLiveEvent(m: Model, r: Real, k: number, c: ClaimOutcome): Promise<void> {
  const live: WrapperEvent[] = [];
  const events = new AttemptEvents('pay', { emit: (e: WrapperEvent) => void live.push(e) });
  const key = payClaim(r.resourceKeys[k] as string).key;
  const job = { queueName: 'payments', id: 'job-model' } as Job;
  const scope: AttemptScope = {
    job,
    token: undefined,
    key,
    k: r.keys[k] as string,
    taskId: undefined,
    facts: { attemptsMade: 0, attemptsStarted: 1, stalledCounter: 0 },
  };
  decideClaim(c, scope, events);
  const [wrapper] = live;
  if (!wrapper || !LEDGER_TRANSITIONS.has(wrapper.type)) return;
  const emitted = auditEventFromWrapper(wrapper, 'worker:model');
  const rec = await r.ledgerAt(m.now).get(r.keys[k] as string);
  const derived = eventsForRecord(rec as NonNullable<typeof rec>);
  const made = c.kind === 'acquired' || (c.kind === 'unknown' && c.transitioned);
  if (made) {
    const last = derived.at(-1);
    const pick = (e: AuditEvent | undefined) =>
      e && {
        id: e.eventId,
        action: e.action,
        decision: e.decision,
        reason: e.reasonCode,
        at: e.createdAt,
        epoch: e.epoch,
      };
    expect(pick(emitted)).toEqual(pick(last));
  } else {
    expect(derived.map((e) => e.eventId)).toContain(emitted.eventId);
  }
}

// ---- the commands --------------------------------------------------------------------------

type Cmd = fc.AsyncCommand<Model, Real>;

class Claim implements Cmd {
  constructor(
    readonly k: number,
    readonly input: number,
  ) {}
  check = () => true;
  async run(m: Model, r: Real) {
    const c = await r
      .ledgerAt(m.now)
      .claim(payClaim(r.resourceKeys[this.k] as string, { downstream: DOWNSTREAMS[this.k] as Downstream }, this.input));
    const expected = modelClaim(m, this.k, this.input);
    await compare(m, r, this.k, expected, outcomeOf(c));
    await compareLiveEvent(m, r, this.k, c);
  }
  toString = () => `claim(k${this.k}, input ${this.input})`;
}

/**
 * A batched claim of key k, in one batch with a key no one claimed before, raced by a single claim
 * of k from another ledger: of the two, exactly one makes the model's transition and the other
 * meets the row it left (in progress, unknown, the replay). When k is new, the batch's insert may
 * lose to the single claim's (a unique violation): its other new key then goes through the full
 * claim, and must come back acquired, readable, with its `claimed` transition recorded.
 */
class RaceClaim extends Claim {
  override async run(m: Model, r: Real) {
    const downstream = DOWNSTREAMS[this.k] as Downstream;
    const companion = payClaim(`${r.resourceKeys[this.k]}:companion:${r.companions++}`, { downstream });
    const claim = payClaim(r.resourceKeys[this.k] as string, { downstream }, this.input);
    const batched = r.ledgerAt(m.now);
    const [fresh, viaBatch, viaSingle] = await Promise.all([
      batched.claim(companion),
      batched.claim(claim),
      r.singleAt(m.now).claim(claim),
    ]);
    const first = modelClaim(m, this.k, this.input);
    const second = modelClaim(m, this.k, this.input);
    if (first === 'acquired:claimed') racesOnNewKeys++;
    await compare(
      m,
      r,
      this.k,
      [first, second].sort().join(' '),
      [outcomeOf(viaBatch), outcomeOf(viaSingle)].sort().join(' '),
    );
    expect(outcomeOf(fresh)).toBe('acquired:claimed');
    const rec = await batched.get(companion.key);
    expect(rec && { status: rec.status, epoch: rec.epoch, last: rec.lastTransition }).toEqual({
      status: 'locked',
      epoch: 1,
      last: 'claimed',
    });
    expect(rec?.transitions?.map((x) => [x.transition, x.epoch])).toEqual([['claimed', 1]]);
  }
  override toString = () => `race(k${this.k}, input ${this.input}: batched with a new key, and single)`;
}

type FencedKind = 'heartbeat' | 'complete' | 'fail' | 'fail_retryable' | 'release' | 'unknown';
const FENCED: Record<FencedKind, { transition?: Transition; status?: LedgerStatus; expires: boolean }> = {
  heartbeat: { expires: false },
  complete: { transition: 'completed', status: 'completed', expires: true },
  fail: { transition: 'failed', status: 'failed', expires: true },
  fail_retryable: { transition: 'failed_retryable', status: 'released', expires: true },
  release: { transition: 'released', status: 'released', expires: true },
  unknown: { transition: 'marked_unknown', status: 'unknown', expires: false },
};

class Fenced implements Cmd {
  constructor(
    readonly kind: FencedKind,
    readonly k: number,
    /** 0: the current epoch; 1: the one before (a holder that lost its lease). */
    readonly behind: number,
  ) {}
  check = () => true;
  async run(m: Model, r: Real) {
    const epoch = (m.rows[this.k]?.epoch ?? 1) - this.behind;
    const l = r.ledgerAt(m.now);
    const key = r.keys[this.k] as string;
    const error = { code: 'E_MODEL', message: 'model' };
    const actual = await fencedOutcome(() => {
      switch (this.kind) {
        case 'heartbeat':
          return l.heartbeat(key, epoch, LEASE_MS);
        case 'complete':
          return l.complete(key, epoch, { ok: true });
        case 'fail':
          return l.fail(key, epoch, error, 'terminal');
        case 'fail_retryable':
          return l.fail(key, epoch, error, 'retryable');
        case 'release':
          return l.release(key, epoch);
        case 'unknown':
          return l.markUnknown(key, epoch, error);
      }
    });
    const spec = FENCED[this.kind];
    const expected = modelFenced(m, this.k, epoch, (row) => {
      if (!spec.status) {
        row.leaseUntil = m.now + LEASE_MS;
        return undefined;
      }
      row.status = spec.status;
      row.leaseUntil = null;
      row.expiresAt = spec.expires ? m.now + RETENTION_MS : null;
      return spec.transition;
    });
    await compare(m, r, this.k, expected, actual);
  }
  toString = () => `${this.kind}(k${this.k}${this.behind ? ', stale epoch' : ''})`;
}

/**
 * The row of a held claim is lost (deleted, as a restore or a promoted asynchronous standby loses
 * it), then its holder comes to record its outcome: the completion finds no row (a lost record,
 * never stale) and the holder writes the row back `unknown` at its epoch (`record_lost`), the only
 * transition left in its record. Without a locked row it only checks that a write-back over a row
 * at the same epoch or above writes nothing.
 */
class LoseRecord implements Cmd {
  constructor(readonly k: number) {}
  check = () => true;
  async run(m: Model, r: Real) {
    const l = r.ledgerAt(m.now);
    const key = r.keys[this.k] as string;
    const row = m.rows[this.k];
    const options = payClaim(
      r.resourceKeys[this.k] as string,
      { downstream: DOWNSTREAMS[this.k] as Downstream },
      row?.input ?? 1,
    );
    const error = { code: 'IDEMPOTENCY_RECORD_LOST', message: 'lost' };
    if (row?.status !== 'locked') {
      const written = row ? await l.recordLost(options, row.epoch, error) : null;
      await compare(m, r, this.k, 'none', written === null ? 'none' : 'written');
      return;
    }
    await t.query(`delete from ${t.schema}.idempotency_ledger where key = $1`, [key]);
    expect(await fencedOutcome(() => l.complete(key, row.epoch, { ok: true }))).toBe('lost');
    const written = await l.recordLost(options, row.epoch, error);
    m.transitions[this.k] = [];
    record(m, this.k, { ...row, status: 'unknown', leaseUntil: null, expiresAt: null }, 'record_lost');
    await compare(m, r, this.k, 'written', written === null ? 'none' : 'written');
  }
  toString = () => `lose record(k${this.k})`;
}

class Invalidate implements Cmd {
  constructor(readonly k: number) {}
  check = () => true;
  async run(m: Model, r: Real) {
    const actual = await fencedOutcome(() =>
      r.ledgerAt(m.now).invalidate(r.keys[this.k] as string, { actorId: 'alice', reason: 'model' }),
    );
    const row = m.rows[this.k];
    let expected: Outcome = 'illegal';
    if (row) {
      expected = 'ok';
      const epoch = row.epoch + 1;
      record(
        m,
        this.k,
        { ...row, status: 'invalidated', epoch, leaseUntil: null, expiresAt: m.now + RETENTION_MS },
        'invalidated',
      );
    }
    await compare(m, r, this.k, expected, actual);
  }
  toString = () => `invalidate(k${this.k})`;
}

class Resolve implements Cmd {
  constructor(
    readonly k: number,
    readonly committed: boolean,
  ) {}
  check = () => true;
  async run(m: Model, r: Real) {
    const outcome = this.committed
      ? { committed: true as const, result: { found: true } }
      : { committed: false as const };
    const actual = await fencedOutcome(() =>
      r.ledgerAt(m.now).resolve(r.keys[this.k] as string, outcome, { actorId: 'alice', reason: 'model' }),
    );
    const row = m.rows[this.k];
    let expected: Outcome = 'illegal';
    if (row?.status === 'unknown') {
      expected = 'ok';
      record(
        m,
        this.k,
        {
          ...row,
          status: this.committed ? 'completed' : 'released',
          epoch: row.epoch + 1,
          expiresAt: m.now + RETENTION_MS,
        },
        this.committed ? 'resolved_committed' : 'resolved_not_committed',
      );
    }
    await compare(m, r, this.k, expected, actual);
  }
  toString = () => `resolve(k${this.k}, ${this.committed ? 'committed' : 'not committed'})`;
}

class Advance implements Cmd {
  constructor(readonly ms: number) {}
  check = () => true;
  async run(m: Model) {
    m.now += this.ms;
  }
  toString = () => `advance(${this.ms / 1000} s)`;
}

const key = fc.integer({ min: 0, max: DOWNSTREAMS.length - 1 });
const COMMANDS = [
  fc.tuple(key, fc.integer({ min: 1, max: 2 })).map(([k, input]) => new Claim(k, input)),
  fc.tuple(key, fc.integer({ min: 1, max: 2 })).map(([k, input]) => new RaceClaim(k, input)),
  fc
    .tuple(
      fc.constantFrom<FencedKind>('heartbeat', 'complete', 'fail', 'fail_retryable', 'release', 'unknown'),
      key,
      fc.constantFrom(0, 0, 0, 1),
    )
    .map(([kind, k, behind]) => new Fenced(kind, k, behind)),
  key.map((k) => new Invalidate(k)),
  key.map((k) => new LoseRecord(k)),
  fc.tuple(key, fc.boolean()).map(([k, committed]) => new Resolve(k, committed)),
  fc.constantFrom(31_000, 61_000).map((ms) => new Advance(ms)),
];

describe('the ledger against a model of its state machine', () => {
  it('claim, heartbeat, complete, fail, release, unknown, invalidate, resolve and expiry: the same states, outcomes and transitions', async () => {
    const ledgers: PostgresLedger[] = [];
    try {
      await fc.assert(
        fc.asyncProperty(fc.commands(COMMANDS, { maxCommands: 40, size: 'max' }), async (cmds) => {
          const id = ++run;
          const byOffset = new Map<number, PostgresLedger>();
          const singleByOffset = new Map<number, PostgresLedger>();
          const resourceKeys = DOWNSTREAMS.map((d) => `model:${id}:${d}:${Math.random()}`);
          const real: Real = {
            resourceKeys,
            keys: resourceKeys.map((resourceKey) => boundedKey(payClaim(resourceKey).key)),
            ledgerAt: (now) => {
              let l = byOffset.get(now);
              if (!l) {
                l = new PostgresLedger({ pool, schema: t.schema, clockOffsetMs: now });
                byOffset.set(now, l);
                ledgers.push(l);
              }
              return l;
            },
            singleAt: (now) => {
              let l = singleByOffset.get(now);
              if (!l) {
                l = new PostgresLedger({ pool, schema: t.schema, clockOffsetMs: now, batching: false });
                singleByOffset.set(now, l);
                ledgers.push(l);
              }
              return l;
            },
            companions: 0,
          };
          const model: Model = { now: 0, rows: [], transitions: DOWNSTREAMS.map(() => []) };
          await fc.asyncModelRun(() => ({ model, real }), cmds);
        }),
        // Bounded for a loaded machine (each command is one to three statements); a fixed seed, so
        // that every run of the suite reaches each transition and outcome checked below.
        { numRuns: 60, seed: 20261202 },
      );
    } finally {
      for (const l of ledgers) await l.close();
    }
    // The runs reached every transition of the table, and every outcome of a call.
    expect([...TRANSITION_NAMES].filter((tr) => !seen.has(tr))).toEqual([]);
    const outcomes = [
      'inProgress',
      'conflict',
      'completed',
      'failed',
      'unknown',
      'unknown:transitioned',
      'stale',
      'illegal',
      'lost',
    ];
    expect(outcomes.filter((o) => !seen.has(o))).toEqual([]);
    expect(commandsRun).toBeGreaterThan(500);
    expect(racesOnNewKeys).toBeGreaterThan(20);
  });
});
