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
export type AuditBatchData = { encoding: 'deflate-raw'; count: number; payload: string };

/** A batch decoded by the writer: the events, and their JSON text as it was encoded. */
export type DecodedAuditBatch = { events: unknown[]; json?: string };

const deflate = promisify(deflateRaw);
const inflate = promisify(inflateRaw);
/** Level 1: nearly the ratio of the default level on this data, at a fraction of its cost. */
const LEVEL = 1;
/** A payload that inflates beyond this is refused (a batch of 500 ~1 KB events is ~0.5 MB). */
const MAX_INFLATED_BYTES = 64 * 1024 * 1024;

/** Job options of an audit batch: the id is derived from the events, so a re-sent batch is absorbed. */
export function auditJobOptions(events: readonly AuditEvent[]) {
  const jobId = `audit_${sha256(events.map((e) => e.eventId).join(','), 'base64url')}`;
  return { jobId, removeOnComplete: true, removeOnFail: 1000, attempts: 5, backoff: 1000 } as const;
}

/**
 * Builds the audit job for a batch of (redacted, validated) events. Compression runs off the
 * event loop. `json` is the events' JSON, as text or as its UTF-8 bytes, when the caller has it
 * already (see {@link splitOversized}).
 */
export async function auditBatchJob(events: readonly AuditEvent[], json: string | Buffer = JSON.stringify(events)) {
  const payload = (await deflate(json, { level: LEVEL })).toString('base64');
  const data: AuditBatchData = { encoding: 'deflate-raw', count: events.length, payload };
  return { name: AUDIT_JOB_NAME, data, opts: auditJobOptions(events) };
}

/**
 * Splits a batch into the events whose JSON is at most `maxBytes` and those over it, serialising
 * each event once: `json` is the kept events' array as UTF-8 bytes, as `JSON.stringify(kept)`
 * would write it, so the batch is deflated without a second pass nor a copy of its text. Each
 * event's text is written straight into the batch's bytes, which gives its exact size; an event
 * over the limit is taken back out. An event that cannot be serialised at all is kept (the
 * encoder's failure sends the batch to the outbox path, as before): `json` is then undefined.
 */
export function splitOversized(
  events: readonly AuditEvent[],
  maxBytes: number,
): { kept: AuditEvent[]; json: Buffer | undefined; oversized: { event: AuditEvent; bytes: number }[] } {
  // Each event's text, or the size in bytes of one too long to be kept (its text is not held on to).
  const texts: (string | number)[] = new Array(events.length);
  let chars = 2;
  for (let i = 0; i < events.length; i++) {
    let text: string;
    try {
      text = JSON.stringify(events[i]);
    } catch {
      return { kept: [...events], json: undefined, oversized: [] };
    }
    // Longer in UTF-16 units than the limit in bytes: over it, whatever its characters.
    if (text.length > maxBytes) texts[i] = Buffer.byteLength(text);
    else {
      texts[i] = text;
      chars += text.length + 1;
    }
  }
  // UTF-8 takes at most 3 bytes per UTF-16 unit.
  const out = Buffer.allocUnsafe(chars * 3);
  const kept: AuditEvent[] = [];
  const oversized: { event: AuditEvent; bytes: number }[] = [];
  let at = 1;
  out[0] = 0x5b; // [
  for (let i = 0; i < events.length; i++) {
    const text = texts[i] as string | number;
    const start = kept.length > 0 ? at + 1 : at;
    const bytes = typeof text === 'number' ? text : out.write(text, start, 'utf8');
    if (bytes > maxBytes) {
      oversized.push({ event: events[i] as AuditEvent, bytes });
      continue;
    }
    if (kept.length > 0) out[at] = 0x2c; // ,
    kept.push(events[i] as AuditEvent);
    at = start + bytes;
  }
  out[at++] = 0x5d; // ]
  return { kept, json: out.subarray(0, at), oversized };
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
  let json: string;
  try {
    json = (await inflate(Buffer.from(d.payload, 'base64'), { maxOutputLength: MAX_INFLATED_BYTES })).toString('utf8');
  } catch {
    throw new UndecodableAuditBatchError('not_inflatable');
  }
  let events: unknown;
  try {
    events = JSON.parse(json);
  } catch {
    throw new UndecodableAuditBatchError('not_json');
  }
  if (!Array.isArray(events)) throw new UndecodableAuditBatchError('not_an_array');
  return { events, json };
}
