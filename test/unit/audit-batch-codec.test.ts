import { describe, expect, it } from 'vitest';
import { type AuditEvent, eventIdFor } from '../../src/audit/audit-event.js';
import {
  auditBatchJob,
  auditBatchJobOf,
  BatchBytes,
  decodeAuditBatch,
  splitOversized,
} from '../../src/audit/batch-codec.js';

function event(i: number, note: string): AuditEvent {
  return {
    eventId: eventIdFor('codec', i),
    actorType: 'agent',
    actorId: 'a1',
    action: 'tool.note',
    resourceType: 'note',
    resourceId: `n${i}`,
    decision: 'allow',
    createdAt: '2026-01-01T00:00:00.000Z',
    phase: 'outcome',
    details: { note },
  };
}

// Text of 1, 2, 3 and 4 UTF-8 bytes per character (the last as a surrogate pair), quotes and
// escapes that JSON lengthens, and a lone surrogate (written as an escape).
const NOTES = ['plain', 'é'.repeat(40), '€'.repeat(40), '😀'.repeat(40), '"\\\n\t\u0001', '\ud800x'];

/** Events within a 600-byte limit and over it (first, in the middle and last; all 1 to 4 bytes a character). */
const mixedBatch = (): AuditEvent[] => [
  event(0, '€'.repeat(300)), // 900 bytes of text alone: over
  ...NOTES.map((n, i) => event(i + 1, n)),
  event(20, 'é'.repeat(400)), // 800 bytes: over, in the middle
  event(21, 'x'.repeat(100)),
  event(22, '😀'.repeat(200)), // 800 bytes: over, last
];

describe('splitOversized', () => {
  it('keeps events within the limit as the JSON array of exactly those events, each measured in UTF-8 bytes', () => {
    const limit = 600;
    const events = mixedBatch();
    const { kept, json, oversized } = splitOversized(events, limit);
    expect(oversized.map((o) => o.event.eventId)).toEqual([events[0], events[7], events[9]].map((e) => e?.eventId));
    for (const o of oversized) expect(o.bytes).toBe(Buffer.byteLength(JSON.stringify(o.event)));
    expect(kept).toEqual(events.filter((e) => !oversized.some((o) => o.event === e)));
    expect(json?.toString('utf8')).toBe(JSON.stringify(kept));
    expect(JSON.parse(json?.toString('utf8') ?? '')).toEqual(JSON.parse(JSON.stringify(kept)));
  });

  it('an event exactly at the limit is kept; one byte over is not', () => {
    const base = event(1, '');
    const room = 300 - Buffer.byteLength(JSON.stringify(base));
    const at = event(1, 'é'.repeat(room / 2));
    const over = event(2, `${'é'.repeat(room / 2)}x`);
    expect(Buffer.byteLength(JSON.stringify(at))).toBe(300);
    const { kept, oversized } = splitOversized([at, over], 300);
    expect(kept).toEqual([at]);
    expect(oversized).toEqual([{ event: over, bytes: 301 }]);
  });

  it('all over the limit, or none at all: an empty array', () => {
    expect(splitOversized([event(1, 'x'.repeat(50))], 10).json?.toString()).toBe('[]');
    expect(splitOversized([], 10).json?.toString()).toBe('[]');
  });

  it('an event that cannot be serialised keeps the whole batch and gives no JSON', () => {
    const cyclic = event(1, 'x') as AuditEvent & { details: Record<string, unknown> };
    cyclic.details.self = cyclic;
    const { kept, json, oversized } = splitOversized([event(0, 'a'), cyclic], 1000);
    expect(kept).toHaveLength(2);
    expect(json).toBeUndefined();
    expect(oversized).toEqual([]);
  });

  it('the batch job made from the bytes decodes to the kept events', async () => {
    const events = NOTES.map((n, i) => event(i, n));
    const { kept, json } = splitOversized(events, 256 * 1024);
    const job = await auditBatchJob(kept, json);
    expect(job.data.count).toBe(events.length);
    const decoded = await decodeAuditBatch(job.data);
    expect(decoded.events).toEqual(JSON.parse(JSON.stringify(events)));
    expect(job).toEqual(await auditBatchJob(kept));
  });
});

describe('splitOversized, events far over the limit', () => {
  it('reports them in their order among the others, each with its exact size', () => {
    const far = event(1, 'x'.repeat(5000)); // longer in characters than the limit
    const near = event(2, '€'.repeat(200)); // shorter in characters, longer in bytes
    const small = event(3, 'ok');
    const { kept, json, oversized } = splitOversized([near, small, far, small], 500);
    expect(oversized).toEqual([
      { event: near, bytes: Buffer.byteLength(JSON.stringify(near)) },
      { event: far, bytes: Buffer.byteLength(JSON.stringify(far)) },
    ]);
    expect(kept).toEqual([small, small]);
    expect(json?.toString()).toBe(JSON.stringify([small, small]));
  });
});

describe('BatchBytes', () => {
  const fill = (batch: BatchBytes, events: AuditEvent[]) => events.map((e) => batch.add(e));

  it('holds the JSON array of exactly the events it added, each measured in UTF-8 bytes, over any number of batches', () => {
    const batch = new BatchBytes(600);
    for (let round = 0; round < 3; round++) {
      const events = mixedBatch();
      const answers = fill(batch, events);
      const kept = events.filter((_, i) => 'added' in (answers[i] as object));
      expect(answers.map((a) => Object.keys(a)[0])).toEqual([
        'oversized',
        ...NOTES.map(() => 'added'),
        'oversized',
        'added',
        'oversized',
      ]);
      for (const [i, a] of answers.entries()) {
        const bytes = 'added' in a ? a.added : 'oversized' in a ? a.oversized : -1;
        expect(bytes).toBe(Buffer.byteLength(JSON.stringify(events[i])));
      }
      expect(batch.count).toBe(kept.length);
      const { eventIds, json } = batch.take();
      expect(eventIds).toEqual(kept.map((e) => e.eventId));
      expect(json.toString('utf8')).toBe(JSON.stringify(kept));
      expect(batch.count).toBe(0);
    }
  });

  it('an event exactly at the limit is added; one byte over is not, and leaves the batch as it was', () => {
    const base = event(1, '');
    const room = 300 - Buffer.byteLength(JSON.stringify(base));
    const at = event(1, 'é'.repeat(room / 2));
    const over = event(2, `${'é'.repeat(room / 2)}x`);
    const batch = new BatchBytes(300);
    expect(batch.add(over)).toEqual({ oversized: 301 });
    expect(batch.add(at)).toEqual({ added: 300 });
    expect(batch.add(over)).toEqual({ oversized: 301 });
    expect(batch.take().json.toString()).toBe(JSON.stringify([at]));
  });

  it('grows past its first allocation, and an empty batch is an empty array', () => {
    const batch = new BatchBytes(256 * 1024);
    expect(batch.take().json.toString()).toBe('[]');
    // About 1.5 MB of text of 1 to 4 bytes a character: the bytes are reallocated several times.
    const events = Array.from({ length: 300 }, (_, i) => event(i, (NOTES[i % NOTES.length] as string).repeat(60)));
    fill(batch, events);
    const { eventIds, json } = batch.take();
    expect(eventIds).toHaveLength(300);
    expect(json.length).toBeGreaterThan(64 * 1024);
    expect(json.toString('utf8')).toBe(JSON.stringify(events));
  });

  it('an event that cannot be serialised is not added, and the others go on', () => {
    const cyclic = event(1, 'x') as AuditEvent & { details: Record<string, unknown> };
    cyclic.details.self = cyclic;
    const batch = new BatchBytes(1000);
    const ok = [event(0, 'a'), event(2, 'b')];
    expect(batch.add(ok[0] as AuditEvent)).toHaveProperty('added');
    expect(batch.add(cyclic)).toEqual({ unserialisable: true });
    expect(batch.add(ok[1] as AuditEvent)).toHaveProperty('added');
    expect(batch.take().json.toString()).toBe(JSON.stringify(ok));
  });

  it('its job is the job of the same events built from the events', async () => {
    const events = NOTES.map((n, i) => event(i, n));
    const batch = new BatchBytes(256 * 1024);
    fill(batch, events);
    const job = await auditBatchJobOf(batch.take());
    expect(job).toEqual(await auditBatchJob(events));
    expect((await decodeAuditBatch(job.data)).events).toEqual(JSON.parse(JSON.stringify(events)));
  });
});
