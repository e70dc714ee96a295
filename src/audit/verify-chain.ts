import { createHash } from 'node:crypto';
import { checkSchema } from '../db/connection.js';
import { chainDaySql, GENESIS, microsTextSql, storedDigestSql } from './chain-sql.js';
import { eventColumnsDigest, eventDigestV3, eventDigestV4 } from './event-digest.js';
import { COLUMNS } from './insert-statement.js';
import type { SqlRunner } from './partitions.js';
import { receiptSql } from './receipts-sql.js';

/** The head of one chain: its day and slot, the place and digest of its last event. */
export type ChainHead = {
  /** `<YYYY-MM-DD>/<slot>`. */
  chain: string;
  seq: number;
  /** The last event's chain digest, hex. */
  digest: string;
};

/**
 * What `verifyAuditChains` found wrong, first in chain order per chain:
 * - `changed`: the event's columns (or its digest) are not what was chained;
 * - `removed`: events of the chain are missing (`eventId`: a removed event's id when the
 *   event-id table still names it, else the event after the gap, or the last one kept);
 * - `inserted`: a row that is not in its place: outside every chain, at a place already taken, or
 *   past the chain's head;
 * - `anchor`: a head exported earlier (`anchors`) is no longer in the chain as it was.
 */
export type ChainProblem = {
  kind: 'changed' | 'removed' | 'inserted' | 'anchor';
  chain: string;
  seq: number | null;
  eventId: string | null;
  message: string;
};

export type VerifyResult = {
  ok: boolean;
  chains: number;
  events: number;
  /** Every problem, in chain order; `problems[0]` is the first. */
  problems: ChainProblem[];
};

export type VerifyOptions = {
  /** Heads exported earlier (`exportChainHeads`): each must still be in its chain as it was. */
  anchors?: readonly ChainHead[];
};

const sha256 = (a: Buffer, b: Buffer) => createHash('sha256').update(a).update(b).digest();
const dayText = (d: Date | string) => (typeof d === 'string' ? d.slice(0, 10) : d.toISOString().slice(0, 10));
const chainName = (day: Date | string, slot: number) => `${dayText(day)}/${slot}`;

/**
 * The current head of every chain, to anchor elsewhere (a log, a ticket, another database): a
 * later `verifyAuditChains(…, { anchors })` proves the chain still holds what it held.
 *
 * @example console.log(JSON.stringify(await exportChainHeads(pool, 'public')));
 */
export async function exportChainHeads(db: SqlRunner, schema: string): Promise<ChainHead[]> {
  const s = checkSchema(schema);
  const res = await db.query(
    `select to_char(day, 'YYYY-MM-DD') as day, slot, seq, encode(digest, 'hex') as digest
     from ${s}.audit_chains where seq > 0 order by day, slot`,
  );
  return res.rows.map((r) => ({
    chain: chainName(r.day as string, Number(r.slot)),
    seq: Number(r.seq),
    digest: r.digest as string,
  }));
}

/**
 * A stored event as the walk reads it: its place, its link, and what its digest is computed from.
 * `d`: its digest when Postgres computes it alone (versions 1 and 2); `micros` and `columns`: what
 * version 3 is computed from (event-digest.ts).
 */
type Row = {
  slot: number | null;
  seq: string | null;
  eventId: string;
  /** `chain_digest`: the event's link (versions 1 to 3), or its own digest (version 4). */
  link: Buffer | null;
  /** `chain_link`: under version 4, the link of the batch this event ends; null on the batch's other events. */
  batchLink: Buffer | null;
  v: number;
  d: Buffer | null;
  micros: string;
  columns: Record<string, unknown>;
};

/** Rows fetched at a time: a day's chains are walked page by page, in chain order. */
const PAGE = 5000;
/**
 * The walk's cursor. Held (`with hold`), so that it also reads through a connection outside a
 * transaction; closed when the day is walked, or the walk fails.
 */
const CURSOR = 'bqi_verify_walk';

/**
 * Walks every chain of the schema's audit trail (a day at a time, in chain order) and recomputes
 * each event's digest from its stored columns. Reports each event changed, removed or inserted
 * out of order; `ok` is true when there is none. A day whose partition was dropped starts from its
 * recorded anchor (`audit_chain_anchors`).
 *
 * Given a pool, it reads the trail as of one moment (a read-only REPEATABLE READ transaction on
 * one of its connections), so writers may go on appending while it walks; given a single
 * connection, it reads through it as it is (open a snapshot first on a trail being written).
 *
 * @example
 * const r = await verifyAuditChains(pool, 'public');
 * if (!r.ok) console.error(r.problems[0]);
 */
export async function verifyAuditChains(
  db: SqlRunner | PoolLike,
  schema: string,
  options: VerifyOptions = {},
): Promise<VerifyResult> {
  const s = checkSchema(schema);
  if (!isPool(db)) return walkChains(db, s, options);
  // One moment of the trail: the heads, the events and the event ids read in one snapshot. Read
  // statement by statement, a batch stored between the read of the heads and the walk would
  // stand past its chain's head, and one stored during the walk could be read in part. (The
  // snapshot holds back vacuum's horizon while the walk lasts.)
  const client = await db.connect();
  try {
    await client.query('begin isolation level repeatable read read only');
    const result = await walkChains(client, s, options);
    await client.query('commit');
    return result;
  } catch (err) {
    await client.query('rollback').catch(() => {});
    throw err;
  } finally {
    client.release();
  }
}

/** A pool of connections (`pg.Pool`): verify takes one of them for its snapshot. */
export type PoolLike = SqlRunner & { connect(): Promise<SqlRunner & { release(err?: Error | boolean): void }> };

/**
 * A pool, not a connection: a `pg.Client` (a pool's checked-out client too) also has `connect`,
 * which connects it; a pool counts its connections (`totalCount`), a client does not.
 */
const isPool = (db: SqlRunner | PoolLike): db is PoolLike =>
  typeof (db as { connect?: unknown }).connect === 'function' && 'totalCount' in db;

/** The walk of {@link verifyAuditChains}, its reads all on `db` (a pool's connection in a snapshot, or what the caller gave). */
async function walkChains(db: SqlRunner, s: string, options: VerifyOptions): Promise<VerifyResult> {
  const heads = new Map<string, { seq: number; digest: Buffer }>();
  for (const r of (await db.query(`select to_char(day, 'YYYY-MM-DD') as day, slot, seq, digest from ${s}.audit_chains`))
    .rows)
    heads.set(chainName(r.day as string, Number(r.slot)), { seq: Number(r.seq), digest: r.digest as Buffer });
  const starts = new Map<string, { seq: number; digest: Buffer }>();
  for (const r of (
    await db.query(`select to_char(day, 'YYYY-MM-DD') as day, slot, seq, digest from ${s}.audit_chain_anchors`)
  ).rows)
    starts.set(chainName(r.day as string, Number(r.slot)), { seq: Number(r.seq), digest: r.digest as Buffer });
  const days = (
    await db.query(
      `select to_char(day, 'YYYY-MM-DD') as day from (
         select day from ${s}.audit_chains union select distinct ${chainDaySql('created_at')} from ${s}.audit_events
       ) d order by day`,
    )
  ).rows.map((r) => r.day as string);
  const anchors = new Map<string, ChainHead[]>();
  for (const a of options.anchors ?? []) anchors.set(a.chain, [...(anchors.get(a.chain) ?? []), a]);
  const problems: ChainProblem[] = [];
  let events = 0;
  const seen = new Set<string>();
  const select = daySql(s);
  for (const day of days) {
    const lost = new LostIds(db, s, day);
    const walkerOf = (slot: number) => {
      const chain = chainName(day, slot);
      seen.add(chain);
      return new ChainWalk(slot, chain, lost, starts.get(chain), heads.get(chain), anchors.get(chain) ?? [], problems);
    };
    const walked = new Set<number>();
    let walk: ChainWalk | undefined;
    // The day in chain order, read and sorted once, then fetched a page at a time (no index
    // gives the chain order: a query per page would read and sort the whole day again each time).
    await db.query(`declare ${CURSOR} no scroll cursor with hold for ${select}`, [day]);
    try {
      for (;;) {
        const rows = (await db.query(`fetch forward ${PAGE} from ${CURSOR}`)).rows.map(toRow);
        for (const r of rows) {
          events++;
          if (r.slot === null) {
            problems.push({
              kind: 'inserted',
              chain: `${day}/-`,
              seq: null,
              eventId: r.eventId,
              message: 'stored outside every chain',
            });
            continue;
          }
          if (walk?.slot !== r.slot) {
            await walk?.finish();
            walked.add(r.slot);
            walk = walkerOf(r.slot);
          }
          await walk.step(r);
        }
        if (rows.length < PAGE) break;
      }
    } catch (err) {
      // The walk's own error is the answer, not a close in a transaction that error aborted.
      await db.query(`close ${CURSOR}`).catch(() => {});
      throw err;
    }
    await db.query(`close ${CURSOR}`);
    await walk?.finish();
    // Chains whose head is recorded but none of whose events is left.
    const empty = [...heads.keys()]
      .filter((name) => name.startsWith(`${day}/`))
      .map((name) => Number(name.slice(11)))
      .filter((slot) => !walked.has(slot))
      .sort((a, b) => a - b);
    for (const slot of empty) await walkerOf(slot).finish();
  }
  for (const [chain, list] of anchors) {
    if (seen.has(chain)) continue;
    for (const a of list) {
      problems.push({ kind: 'anchor', chain, seq: a.seq, eventId: null, message: 'the anchored chain is gone' });
    }
  }
  return { ok: problems.length === 0, chains: seen.size, events, problems };
}

/**
 * A day's events in chain order (those outside every chain first). The order's keys lead the
 * row, so that sorting compares them without stepping over the row's texts before them.
 */
function daySql(s: string): string {
  const columns = COLUMNS.filter(([c]) => c !== 'created_at')
    .map(([c, f]) => `${c === 'redaction' ? receiptSql(s, 'e') : `e.${c}`} as "c.${f}"`)
    .join(', ');
  return `select coalesce(e.chain_slot, -1) as place_slot, coalesce(e.chain_seq, -1) as place_seq,
            e.event_id as "eventId", e.chain_slot as slot, e.chain_seq as seq, e.chain_digest as link,
            e.chain_link as "batchLink", e.chain_v as v, ${storedDigestSql('e')} as d, ${microsTextSql('e')} as micros, ${columns}
     from ${s}.audit_events e
     where e.created_at >= ($1::timestamp at time zone 'UTC') and e.created_at < (($1::timestamp + interval '1 day') at time zone 'UTC')
     order by 1, 2, 3`;
}

function toRow(r: Record<string, unknown>): Row {
  const columns: Record<string, unknown> = {};
  for (const k in r) if (k.startsWith('c.')) columns[k.slice(2)] = r[k];
  return {
    slot: r.slot === null ? null : Number(r.slot),
    seq: r.seq as string | null,
    eventId: r.eventId as string,
    link: r.link as Buffer | null,
    batchLink: r.batchLink as Buffer | null,
    v: Number(r.v),
    d: r.d as Buffer | null,
    micros: r.micros as string,
    columns,
  };
}

/** The digest of a stored event under its row's version; undefined under a version this code does not know. */
function digestOf(r: Row): Buffer | undefined {
  if (r.v === 4) return eventDigestV4(r.columns, r.micros);
  if (r.v === 3) return eventDigestV3(eventColumnsDigest(r.columns), r.micros);
  return r.d ?? undefined;
}

/**
 * One chain walked in order, event by event: what it finds goes to `problems`. An event of
 * versions 1 to 3 carries its link; events of version 4 are linked by batch: each must match its
 * own digest, and the batch's last one carries the link of the digests stored since the previous.
 */
class ChainWalk {
  private prevSeq: number;
  private prevDigest: Buffer;
  private prevId: string | null = null;
  private readonly anchorAt: Map<number, ChainHead>;
  /** The stored digests of the version-4 batch being walked, since the last link. */
  private pending: Buffer[] = [];
  /** Where that batch starts. */
  private batchStart: { seq: number; eventId: string } | undefined;
  /** A problem was already reported inside that batch: a broken link then says nothing more. */
  private troubled = false;

  constructor(
    readonly slot: number,
    private readonly chain: string,
    private readonly lost: LostIds,
    start: { seq: number; digest: Buffer } | undefined,
    private readonly head: { seq: number; digest: Buffer } | undefined,
    anchors: ChainHead[],
    private readonly problems: ChainProblem[],
  ) {
    this.prevSeq = start?.seq ?? 0;
    this.prevDigest = start?.digest ?? GENESIS;
    this.anchorAt = new Map(anchors.map((a) => [a.seq, a]));
  }

  async step(r: Row): Promise<void> {
    const { chain, problems } = this;
    const seq = Number(r.seq);
    if (seq <= this.prevSeq) {
      problems.push({ kind: 'inserted', chain, seq, eventId: r.eventId, message: `at place ${seq}, already taken` });
      return;
    }
    if (seq > this.prevSeq + 1) {
      problems.push({
        kind: 'removed',
        chain,
        seq: this.prevSeq + 1,
        eventId: (await this.lost.next()) ?? r.eventId,
        message: `places ${this.prevSeq + 1}..${seq - 1} missing, before ${r.eventId}`,
      });
      this.troubled = true;
    }
    if (r.v === 4) this.stepInBatch(r, seq);
    else this.stepLinked(r, seq);
    this.anchorAt.delete(seq);
    this.prevSeq = seq;
    this.prevId = r.eventId;
  }

  /** An event that carries its own link (versions 1 to 3). */
  private stepLinked(r: Row, seq: number): void {
    const d = digestOf(r);
    const expected = d ? sha256(this.prevDigest, d) : undefined;
    if (!r.link || !expected?.equals(r.link)) this.changed(r, seq);
    if (this.pending.length > 0) this.unlinkedBatch(seq - 1);
    this.checkAnchor(r, seq, r.link);
    this.prevDigest = r.link ?? expected ?? this.prevDigest;
    this.troubled = false;
  }

  /** An event of a batch linked once (version 4). */
  private stepInBatch(r: Row, seq: number): void {
    const { chain, problems } = this;
    if (this.pending.length === 0) this.batchStart = { seq, eventId: r.eventId };
    const d = digestOf(r);
    if (!r.link || !d?.equals(r.link)) this.changed(r, seq);
    // The digest as stored: a change already reported here does not break the batch's link too.
    this.pending.push(r.link ?? Buffer.alloc(0));
    if (!r.batchLink) {
      this.checkAnchor(r, seq, null);
      return;
    }
    const expected = createHash('sha256').update(this.prevDigest);
    for (const p of this.pending) expected.update(p);
    if (!expected.digest().equals(r.batchLink) && !this.troubled) {
      const start = this.batchStart as { seq: number; eventId: string };
      problems.push({
        kind: 'changed',
        chain,
        seq: start.seq,
        eventId: start.eventId,
        message: `an event of places ${start.seq}..${seq} was rewritten together with its digest`,
      });
    }
    this.checkAnchor(r, seq, r.batchLink);
    this.prevDigest = r.batchLink;
    this.pending = [];
    this.troubled = false;
  }

  /** An event whose columns are not what was chained. */
  private changed(r: Row, seq: number): void {
    this.problems.push({
      kind: 'changed',
      chain: this.chain,
      seq,
      eventId: r.eventId,
      message: 'its columns are not what was chained',
    });
    this.troubled = true;
  }

  /** Version-4 events up to `lastSeq` whose batch has no link (its last event's link is gone). */
  private unlinkedBatch(lastSeq: number): void {
    const start = this.batchStart as { seq: number; eventId: string };
    if (!this.troubled) {
      this.problems.push({
        kind: 'changed',
        chain: this.chain,
        seq: start.seq,
        eventId: start.eventId,
        message: `the batch of places ${start.seq}..${lastSeq} has no link`,
      });
    }
    this.pending = [];
  }

  /** An anchor exported at this place must be the link stored there. */
  private checkAnchor(r: Row, seq: number, link: Buffer | null): void {
    const anchor = this.anchorAt.get(seq);
    if (anchor && (!link || link.toString('hex') !== anchor.digest)) {
      this.problems.push({
        kind: 'anchor',
        chain: this.chain,
        seq,
        eventId: r.eventId,
        message: 'differs from the anchored head',
      });
    }
  }

  async finish(): Promise<void> {
    const { chain, problems, head } = this;
    for (const a of this.anchorAt.values()) {
      problems.push({ kind: 'anchor', chain, seq: a.seq, eventId: null, message: 'the anchored event is gone' });
    }
    if (!head) return;
    if (head.seq > this.prevSeq) {
      problems.push({
        kind: 'removed',
        chain,
        seq: this.prevSeq + 1,
        eventId: (await this.lost.next()) ?? this.prevId,
        message: `places ${this.prevSeq + 1}..${head.seq} missing at the end`,
      });
    } else if (head.seq < this.prevSeq) {
      problems.push({
        kind: 'inserted',
        chain,
        seq: this.prevSeq,
        eventId: this.prevId,
        message: "past the chain's head",
      });
    } else if (!head.digest.equals(this.prevDigest)) {
      problems.push({
        kind: 'changed',
        chain,
        seq: head.seq,
        eventId: this.prevId,
        message: "the chain's head differs",
      });
    }
  }
}

/** The day's removed events' ids (see lostIds), read once when a first gap is found, then handed out in order. */
class LostIds {
  private ids: string[] | undefined;
  constructor(
    private readonly db: SqlRunner,
    private readonly s: string,
    private readonly day: string,
  ) {}
  async next(): Promise<string | undefined> {
    this.ids ??= await lostIds(this.db, this.s, this.day);
    return this.ids.shift();
  }
}

/** Ids the event-id table points at a time of `day` where no event is stored: removed events. */
async function lostIds(db: SqlRunner, s: string, day: string): Promise<string[]> {
  const res = await db.query(
    `select i.event_id from ${s}.audit_event_ids i
     where i.created_at >= ($1::timestamp at time zone 'UTC') and i.created_at < (($1::timestamp + interval '1 day') at time zone 'UTC')
       -- The ids' table collates event_id "C": the default collation's id probes audit_events' key on both columns.
       and not exists (select 1 from ${s}.audit_events e where e.created_at = i.created_at and e.event_id = i.event_id collate "default")
     order by i.created_at, i.event_id`,
    [day],
  );
  return res.rows.map((r) => r.event_id as string);
}
