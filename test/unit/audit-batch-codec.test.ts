import { promisify } from 'node:util';
import { deflateRaw } from 'node:zlib';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { type AuditEvent, eventIdFor } from '../../src/audit/audit-event.js';
import {
  auditBatchJob,
  auditBatchJobOf,
  BatchBytes,
  decodeAuditBatch,
  eventBytes,
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
    // A toJSON answering nothing: JSON.stringify answers undefined, no text at all.
    const nothing = { ...event(3, 'c'), toJSON: () => undefined } as unknown as AuditEvent;
    expect(batch.add(nothing)).toEqual({ unserialisable: true });
    expect(eventBytes(nothing)).toBeUndefined();
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

  it('an event longer in characters than the limit is measured and refused wherever it comes', () => {
    const far = event(1, 'x'.repeat(5000));
    const near = event(2, '€'.repeat(200)); // shorter in characters than the limit, longer in bytes
    const small = event(3, 'ok');
    const batch = new BatchBytes(500);
    expect(fill(batch, [near, small, far, small])).toEqual([
      { oversized: Buffer.byteLength(JSON.stringify(near)) },
      { added: Buffer.byteLength(JSON.stringify(small)) },
      { oversized: Buffer.byteLength(JSON.stringify(far)) },
      { added: Buffer.byteLength(JSON.stringify(small)) },
    ]);
    expect(batch.take().json.toString()).toBe(JSON.stringify([small, small]));
  });
});

describe('eventBytes', () => {
  it("is the size of the event's JSON in UTF-8 bytes, or undefined when JSON cannot write it", () => {
    for (const [i, n] of NOTES.entries()) {
      const e = event(i, n);
      expect(eventBytes(e)).toBe(Buffer.byteLength(JSON.stringify(e)));
    }
    expect(eventBytes(event(1, '😀'))).toBe(Buffer.byteLength(JSON.stringify(event(1, '')), 'utf8') + 4);
    const cyclic = event(1, 'x') as AuditEvent & { details: Record<string, unknown> };
    cyclic.details.self = cyclic;
    expect(eventBytes(cyclic)).toBeUndefined();
    expect(eventBytes({ ...event(2, ''), details: { n: 1n } })).toBeUndefined();
  });
});

describe('decodeAuditBatch', () => {
  const deflate = promisify(deflateRaw);
  /** An audit job's data for these bytes, as the emitter encodes a batch. */
  const jobData = async (bytes: Buffer) => ({
    encoding: 'deflate-raw',
    count: 0,
    payload: (await deflate(bytes)).toString('base64'),
  });
  /** What the writer must read: the whole text parsed at once, as decoded. */
  const whole = (bytes: Buffer) => JSON.parse(bytes.toString('utf8'));

  // Texts that put the cut's bytes where a cut would be wrong: inside strings, between nested
  // objects, next to escapes and characters of 2 to 4 bytes.
  const tricky = fc.constantFrom('},{', '},{"', '"},{"a":1}', '\\},{', '\\"},{', '{', '}', ',', '€},{😀', '\u2028');
  const text = fc.oneof(
    fc.string(),
    fc.string({ unit: 'binary' }),
    fc.array(tricky).map((a) => a.join('')),
  );
  const leaf = fc.oneof(text, fc.integer(), fc.boolean(), fc.constant(null));
  const value = fc.letrec((tie) => ({
    value: fc.oneof({ depthSize: 'small' }, leaf, tie('object'), fc.array(tie('value'), { maxLength: 3 })),
    object: fc.dictionary(text, tie('value'), { maxKeys: 4 }),
  })).value;
  const objects = fc.array(fc.dictionary(text, value, { maxKeys: 5 }), { maxLength: 6 });

  it('reads an array of objects as one parse of its text would, and keeps its bytes as jsonb', async () => {
    await fc.assert(
      fc.asyncProperty(objects, async (events) => {
        const bytes = Buffer.from(JSON.stringify(events));
        const decoded = await decodeAuditBatch(await jobData(bytes));
        expect(decoded.events).toEqual(whole(bytes));
        // jsonb's binary form: its version (1), then the text's bytes exactly.
        expect(Buffer.isBuffer(decoded.json)).toBe(true);
        expect((decoded.json as Buffer)[0]).toBe(1);
        expect((decoded.json as Buffer).subarray(1).equals(bytes)).toBe(true);
      }),
      { numRuns: 400 },
    );
  });

  it('reads any JSON array as one parse does: spaces, values that are not objects, a cut inside an element', async () => {
    const layouts: ((events: unknown[]) => string)[] = [
      (e) => JSON.stringify(e, null, 1),
      (e) => `[ ${e.map((x) => JSON.stringify(x)).join(' , ')} ]`,
      (e) => JSON.stringify([1, ...e, 'x', [{}, {}]]),
      (e) => JSON.stringify([...e, { a: [{ b: '},{' }, { c: 1 }] }]),
    ];
    await fc.assert(
      fc.asyncProperty(objects, fc.constantFrom(...layouts), async (events, layout) => {
        const bytes = Buffer.from(layout(events));
        expect((await decodeAuditBatch(await jobData(bytes))).events).toEqual(whole(bytes));
      }),
      { numRuns: 200 },
    );
  });

  it('reads ill-formed UTF-8 as its decoded text, and refuses what is not a JSON array', async () => {
    // A lone lead byte, a stray continuation byte and a truncated 4-byte sequence, each next to a cut.
    const bytes = Buffer.concat([
      Buffer.from('[{"a":"x'),
      Buffer.from([0xe2]),
      Buffer.from('"},{"b":"'),
      Buffer.from([0x80, 0xf0, 0x9f]),
      Buffer.from('"}]'),
    ]);
    const decoded = await decodeAuditBatch(await jobData(bytes));
    expect(decoded.events).toEqual(whole(bytes));
    expect(decoded.json).toBe(bytes.toString('utf8'));
    for (const [bad, problem] of [
      ['[{"a":1},{"b":', 'not_json'],
      ['[{"a":1}},{"b":2}]', 'not_json'],
      ['{"a":1}', 'not_an_array'],
    ] as const) {
      await expect(decodeAuditBatch(await jobData(Buffer.from(bad)))).rejects.toMatchObject({ problem });
    }
    expect((await decodeAuditBatch(await jobData(Buffer.from('[]')))).events).toEqual([]);
  });
});
