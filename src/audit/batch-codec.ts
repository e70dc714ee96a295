import { isUtf8 } from 'node:buffer';
import { promisify } from 'node:util';
import { deflateRaw, inflateRaw } from 'node:zlib';
import { ERROR_CODES, IdempotencyError, type UndecodableCause } from '../errors/idempotency-error.js';
import { sha256 } from '../fingerprint/sha256.js';
import type { AuditEvent } from './audit-event.js';

export const AUDIT_JOB_NAME = 'audit-batch';

/**
 * What an audit job carries. Events are JSON, deflated and base64-encoded: audit events repeat
 * their field names and most values, so a batch shrinks about eightfold, and Redis, the emitter
 * and the writer move an eighth of the bytes. `{ events: [...] }` (plain) is read too.
 */
export type AuditBatchData = {
  encoding: 'deflate-raw';
  count: number;
  payload: string;
  /** The emitter's tag of the batch (batch-tag.ts), when its events were redacted by the library. */
  tag?: string;
};

/** Tags a batch's payload (batch-tag.ts), or answers undefined. */
export type BatchTagger = (count: number, payload: string) => string | undefined;

/**
 * A batch decoded by the writer: the events, and their JSON array as it was encoded: its text, or
 * (well-formed UTF-8, the emitters' case) the jsonb binary form of its bytes, the version byte
 * then the text, which a statement reads as `$1::jsonb` without the text becoming a string here.
 */
export type DecodedAuditBatch = { events: unknown[]; json?: BatchJson };

/**
 * A batch's events as one JSON array: its text, or jsonb's binary form of it (a version byte, 1,
 * then the UTF-8 text), which Postgres reads as a binary parameter of the `$1::jsonb` statements.
 */
export type BatchJson = string | Buffer;

const deflate = promisify(deflateRaw);
const inflate = promisify(inflateRaw);
/** Level 1: nearly the ratio of the default level on this data, at a fraction of its cost. */
const LEVEL = 1;
/** A payload that inflates beyond this is refused (a batch of 500 ~1 KB events is ~0.5 MB). */
const MAX_INFLATED_BYTES = 64 * 1024 * 1024;

/** Job options of an audit batch: the id is derived from its events' ids, so a re-sent batch is absorbed. */
const jobOptionsOf = (eventIds: readonly string[]) =>
  ({
    jobId: `audit_${sha256(eventIds.join(','), 'base64url')}`,
    removeOnComplete: true,
    removeOnFail: 1000,
    attempts: 5,
    backoff: 1000,
  }) as const;

/**
 * Builds the audit job for a batch of (redacted, validated) events. Compression runs off the
 * event loop. `json` is the events' JSON, as text or as its UTF-8 bytes, when the caller has it
 * already.
 */
export async function auditBatchJob(events: readonly AuditEvent[], json: string | Buffer = JSON.stringify(events)) {
  return jobOf(
    events.map((e) => e.eventId),
    json,
  );
}

/** The audit job of the batch a {@link BatchBytes} holds: its events' ids and their JSON array's bytes. */
export function auditBatchJobOf(batch: { eventIds: readonly string[]; json: Buffer }, tagger?: BatchTagger) {
  return jobOf(batch.eventIds, batch.json, tagger);
}

async function jobOf(eventIds: readonly string[], json: string | Buffer, tagger?: BatchTagger) {
  const payload = (await deflate(json, { level: LEVEL })).toString('base64');
  const data: AuditBatchData = { encoding: 'deflate-raw', count: eventIds.length, payload };
  const tag = tagger?.(eventIds.length, payload);
  if (tag !== undefined) data.tag = tag;
  return { name: AUDIT_JOB_NAME, data, opts: jobOptionsOf(eventIds) };
}

/** The first allocation of a batch's bytes (it doubles as needed): about 100 events of the usual size. */
const INITIAL_BATCH_BYTES = 64 * 1024;

/**
 * A batch's events as the UTF-8 bytes of their JSON array, written as each event arrives: the
 * emitter holds bytes (outside the JavaScript heap) while a batch fills, and an event's objects
 * are garbage once it is accepted. {@link add} serialises the event once and gives its exact
 * size; {@link take} hands over the batch and starts the next one.
 */
export class BatchBytes {
  private buf = Buffer.allocUnsafe(INITIAL_BATCH_BYTES);
  /** Where the next event's separator (or, for the first event, its text) goes. */
  private at = 1;
  private ids: string[] = [];

  constructor(private readonly maxEventBytes: number) {}

  /** Events in the batch. */
  get count(): number {
    return this.ids.length;
  }

  /**
   * Appends `event`'s JSON. Answers `{ added: bytes }`, or, leaving the batch as it was,
   * `{ oversized: bytes }` for an event over the limit, or `{ unserialisable: true }` for one
   * `JSON.stringify` refuses.
   */
  add(event: AuditEvent): { added: number } | { oversized: number } | { unserialisable: true } {
    const text = eventJson(event);
    if (text === undefined) return { unserialisable: true };
    // Longer in UTF-16 units than the limit in bytes: over it, whatever its characters.
    if (text.length > this.maxEventBytes) return { oversized: Buffer.byteLength(text) };
    const start = this.ids.length > 0 ? this.at + 1 : this.at;
    // UTF-8 takes at most 3 bytes per UTF-16 unit; one more for the closing bracket.
    const need = start + text.length * 3 + 1;
    if (need > this.buf.length) {
      const grown = Buffer.allocUnsafe(Math.max(need, this.buf.length * 2));
      this.buf.copy(grown, 0, 0, this.at);
      this.buf = grown;
    }
    const bytes = this.buf.write(text, start, 'utf8');
    if (bytes > this.maxEventBytes) return { oversized: bytes };
    if (this.ids.length > 0) this.buf[this.at] = 0x2c; // ,
    this.ids.push(event.eventId);
    this.at = start + bytes;
    return { added: bytes };
  }

  /** The batch so far (`json` as `JSON.stringify` of its events would write it), and a new, empty one. */
  take(): { eventIds: string[]; json: Buffer } {
    const buf = this.buf;
    buf[0] = 0x5b; // [
    buf[this.at] = 0x5d; // ]
    const batch = { eventIds: this.ids, json: buf.subarray(0, this.at + 1) };
    this.buf = Buffer.allocUnsafe(Math.max(INITIAL_BATCH_BYTES, Math.min(buf.length, 4 * INITIAL_BATCH_BYTES)));
    this.at = 1;
    this.ids = [];
    return batch;
  }
}

/** The size in UTF-8 bytes of `event`'s JSON, or undefined when `JSON.stringify` refuses it. */
export function eventBytes(event: AuditEvent): number | undefined {
  const text = eventJson(event);
  return text === undefined ? undefined : Buffer.byteLength(text);
}

/**
 * `event`'s JSON text, or undefined when `JSON.stringify` throws (a bigint, a cycle, a throwing
 * `toJSON` or getter, nesting past the stack) or answers nothing (a `toJSON` that returns nothing).
 */
function eventJson(event: AuditEvent): string | undefined {
  try {
    const text = JSON.stringify(event);
    return typeof text === 'string' ? text : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The job data cannot be read as a batch of events. `problem` says why, as a stable code; the
 * message is the library's own text for that code (never zlib's or the parser's, which may quote
 * the bytes).
 */
export class UndecodableAuditBatchError extends IdempotencyError<typeof ERROR_CODES.auditBatchUndecodable> {
  constructor(problem: UndecodableCause) {
    super(ERROR_CODES.auditBatchUndecodable, MESSAGES[problem], { problem });
  }

  /** Why the batch cannot be read (the same as `details.problem`). */
  get problem(): UndecodableCause {
    return this.details.problem;
  }
}

const MESSAGES: Record<UndecodableCause, string> = {
  not_a_batch: 'not an audit batch: expected { events: [...] } or a deflate-raw payload',
  not_inflatable: 'audit batch payload does not inflate',
  not_json: 'audit batch payload is not JSON',
  not_an_array: 'audit batch payload is not an array of events',
};

/** Reads an audit job's events, compressed or plain. Throws UndecodableAuditBatchError. */
export async function decodeAuditBatch(data: unknown): Promise<DecodedAuditBatch> {
  const d = (data ?? {}) as Partial<AuditBatchData> & { events?: unknown };
  if (Array.isArray(d.events)) return { events: d.events };
  if (d.encoding !== 'deflate-raw' || typeof d.payload !== 'string')
    throw new UndecodableAuditBatchError('not_a_batch');
  let inflated: Buffer;
  try {
    inflated = await inflate(Buffer.from(d.payload, 'base64'), { maxOutputLength: MAX_INFLATED_BYTES });
  } catch {
    throw new UndecodableAuditBatchError('not_inflatable');
  }
  // Well-formed UTF-8 (what emitters write): the events are read one by one, and the bytes kept
  // for the store as jsonb's binary form. Otherwise the text as decoded, ill-formed sequences replaced.
  if (isUtf8(inflated)) {
    const jsonb = Buffer.allocUnsafe(inflated.length + 1);
    jsonb[0] = JSONB_VERSION;
    inflated.copy(jsonb, 1);
    const bytes = jsonb.subarray(1);
    return { events: eventsOf(bytes) ?? arrayOf(bytes.toString('utf8')), json: jsonb };
  }
  const json = inflated.toString('utf8');
  return { events: arrayOf(json), json };
}

/** The JSON array `json` holds; throws UndecodableAuditBatchError. */
function arrayOf(json: string): unknown[] {
  let events: unknown;
  try {
    events = JSON.parse(json);
  } catch {
    throw new UndecodableAuditBatchError('not_json');
  }
  if (!Array.isArray(events)) throw new UndecodableAuditBatchError('not_an_array');
  return events;
}

/** The first byte of jsonb's binary form (its version), followed by the JSON text. */
const JSONB_VERSION = 1;

const BETWEEN_EVENTS = Buffer.from('},{');

/**
 * The elements of a JSON array of objects written without spaces (what {@link BatchBytes} and
 * `JSON.stringify` write), each parsed from its own part of the bytes; undefined when they cannot
 * be read that way, and the whole text is to be parsed at once.
 *
 * A batch of 500 events is about 300 KB: as one string it is a large object of the JavaScript
 * heap, in pages of its own, mapped for it and freed by a full collection. Where a page touched
 * for the first time is dear (10 µs on the machine of docs/performance.md), making it costs more
 * than reading it. The parts are found at each `},{` and each must parse. Each part starts where
 * an element does; one cut inside that element (at a `},{` in a string, or between nested
 * objects) ends before the element does, and one that runs past it (the next element is no
 * object, or spaces come between) holds more than it: neither parses. So every part that parses is one whole element, and the parts are the array's
 * elements exactly, as one parse of the whole would read them.
 * A cut is at ASCII bytes, which no multi-byte character contains, so each part decodes as it
 * does within the whole. At most one part fails, and the whole is then parsed once.
 */
function eventsOf(bytes: Buffer): unknown[] | undefined {
  const last = bytes.length - 1;
  if (last < 1 || bytes[0] !== 0x5b || bytes[last] !== 0x5d) return undefined; // [ ]
  if (last === 1) return [];
  const events: unknown[] = [];
  for (let start = 1; ; ) {
    const cut = bytes.indexOf(BETWEEN_EVENTS, start);
    const end = cut < 0 ? last : cut + 1;
    try {
      events.push(JSON.parse(bytes.toString('utf8', start, end)));
    } catch {
      return undefined;
    }
    if (cut < 0) return events;
    start = cut + 2;
  }
}
