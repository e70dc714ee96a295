import { createHash } from 'node:crypto';
import { checkSchema } from '../db/connection.js';
import { chainDaySql, GENESIS, storedDigestSql } from './chain-sql.js';
import type { SqlRunner } from './partitions.js';

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

/** `d`: the event's digest under its row's version; null under a version this code does not know. */
type Row = { slot: number | null; seq: string | null; eventId: string; link: Buffer | null; d: Buffer | null };

/**
 * Walks every chain of the schema's audit trail (a day at a time, in chain order) and recomputes
 * each event's digest from its stored columns. Reports each event changed, removed or inserted
 * out of order; `ok` is true when there is none. A day whose partition was dropped starts from its
 * recorded anchor (`audit_chain_anchors`).
 *
 * @example
 * const r = await verifyAuditChains(pool, 'public');
 * if (!r.ok) console.error(r.problems[0]);
 */
export async function verifyAuditChains(
  db: SqlRunner,
  schema: string,
  options: VerifyOptions = {},
): Promise<VerifyResult> {
  const s = checkSchema(schema);
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
  for (const day of days) {
    const res = await db.query(
      `select e.chain_slot as slot, e.chain_seq as seq, e.event_id as "eventId", e.chain_digest as link,
              ${storedDigestSql('e')} as d
       from ${s}.audit_events e
       where e.created_at >= ($1::timestamp at time zone 'UTC') and e.created_at < (($1::timestamp + interval '1 day') at time zone 'UTC')
       order by e.chain_slot nulls first, e.chain_seq, e.event_id`,
      [day],
    );
    const rows = res.rows as unknown as Row[];
    events += rows.length;
    let i = 0;
    for (; i < rows.length && rows[i]?.slot === null; i++) {
      const r = rows[i] as Row;
      problems.push({
        kind: 'inserted',
        chain: `${day}/-`,
        seq: null,
        eventId: r.eventId,
        message: 'stored outside every chain',
      });
    }
    const slots = new Map<number, Row[]>();
    for (; i < rows.length; i++) {
      const r = rows[i] as Row;
      slots.set(r.slot as number, [...(slots.get(r.slot as number) ?? []), r]);
    }
    for (const [name] of heads)
      if (name.startsWith(`${day}/`)) slots.set(Number(name.slice(11)), slots.get(Number(name.slice(11))) ?? []);
    for (const [slot, chainRows] of [...slots].sort((a, b) => a[0] - b[0])) {
      const chain = chainName(day, slot);
      seen.add(chain);
      await walk(db, s, chain, day, chainRows, starts.get(chain), heads.get(chain), anchors.get(chain) ?? [], problems);
    }
  }
  for (const [chain, list] of anchors) {
    if (seen.has(chain)) continue;
    for (const a of list) {
      problems.push({ kind: 'anchor', chain, seq: a.seq, eventId: null, message: 'the anchored chain is gone' });
    }
  }
  return { ok: problems.length === 0, chains: seen.size, events, problems };
}

async function walk(
  db: SqlRunner,
  s: string,
  chain: string,
  day: string,
  rows: Row[],
  start: { seq: number; digest: Buffer } | undefined,
  head: { seq: number; digest: Buffer } | undefined,
  anchors: ChainHead[],
  problems: ChainProblem[],
): Promise<void> {
  let prevSeq = start?.seq ?? 0;
  let prevDigest = start?.digest ?? GENESIS;
  let prevId: string | null = null;
  let removedIds: string[] | undefined;
  const anchorAt = new Map(anchors.map((a) => [a.seq, a]));
  for (const r of rows) {
    const seq = Number(r.seq);
    if (seq <= prevSeq) {
      problems.push({ kind: 'inserted', chain, seq, eventId: r.eventId, message: `at place ${seq}, already taken` });
      continue;
    }
    if (seq > prevSeq + 1) {
      removedIds ??= await lostIds(db, s, day);
      problems.push({
        kind: 'removed',
        chain,
        seq: prevSeq + 1,
        eventId: removedIds.shift() ?? r.eventId,
        message: `places ${prevSeq + 1}..${seq - 1} missing, before ${r.eventId}`,
      });
    }
    const expected = r.d ? sha256(prevDigest, r.d) : undefined;
    if (!r.link || !expected?.equals(r.link)) {
      problems.push({
        kind: 'changed',
        chain,
        seq,
        eventId: r.eventId,
        message: 'its columns are not what was chained',
      });
    }
    const anchor = anchorAt.get(seq);
    if (anchor && (!r.link || r.link.toString('hex') !== anchor.digest)) {
      problems.push({ kind: 'anchor', chain, seq, eventId: r.eventId, message: 'differs from the anchored head' });
    }
    anchorAt.delete(seq);
    prevSeq = seq;
    prevDigest = r.link ?? expected ?? prevDigest;
    prevId = r.eventId;
  }
  for (const a of anchorAt.values()) {
    problems.push({ kind: 'anchor', chain, seq: a.seq, eventId: null, message: 'the anchored event is gone' });
  }
  if (!head) return;
  if (head.seq > prevSeq) {
    removedIds ??= await lostIds(db, s, day);
    problems.push({
      kind: 'removed',
      chain,
      seq: prevSeq + 1,
      eventId: removedIds.shift() ?? prevId,
      message: `places ${prevSeq + 1}..${head.seq} missing at the end`,
    });
  } else if (head.seq < prevSeq) {
    problems.push({ kind: 'inserted', chain, seq: prevSeq, eventId: prevId, message: "past the chain's head" });
  } else if (!head.digest.equals(prevDigest)) {
    problems.push({ kind: 'changed', chain, seq: head.seq, eventId: prevId, message: "the chain's head differs" });
  }
}

/** Ids the event-id table points at a time of `day` where no event is stored: removed events. */
async function lostIds(db: SqlRunner, s: string, day: string): Promise<string[]> {
  const res = await db.query(
    `select i.event_id from ${s}.audit_event_ids i
     where i.created_at >= ($1::timestamp at time zone 'UTC') and i.created_at < (($1::timestamp + interval '1 day') at time zone 'UTC')
       and not exists (select 1 from ${s}.audit_events e where e.created_at = i.created_at and e.event_id = i.event_id)
     order by i.created_at, i.event_id`,
    [day],
  );
  return res.rows.map((r) => r.event_id as string);
}
