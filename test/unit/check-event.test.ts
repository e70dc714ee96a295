import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { auditEventSchema, eventIdFor } from '../../src/audit/audit-event.js';
import { isAuditEvent, parseAuditEvent } from '../../src/audit/check-event.js';

const str = (max: number) =>
  fc.oneof(
    fc.string({ minLength: 1, maxLength: 20 }),
    fc.constantFrom('', 'x'.repeat(max), 'x'.repeat(max + 1), '\u{1F600}'.repeat(Math.ceil(max / 2))),
  );
const num = fc.oneof(
  fc.integer({ min: -3, max: 1000 }),
  fc.constantFrom(0, 1, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, 2 ** 53, -0),
);
const datetime = fc.oneof(
  fc
    .date({ min: new Date('1970-01-01'), max: new Date('2999-12-31'), noInvalidDate: true })
    .map((d) => d.toISOString()),
  fc.constantFrom(
    '2026-11-30T20:48:35Z',
    '2026-11-30T20:48:35.1+02:00',
    '2026-11-30T20:48:35.123456-11:30',
    '2026-11-30T20:48Z',
    '2026-11-30T20:48:35',
    '2026-11-30 20:48:35Z',
    '2023-02-29T00:00:00Z',
    '2024-02-29T00:00:00Z',
    '2026-11-30T24:00:00Z',
    '2026-11-30T20:48:35z',
    '2026-11-30T20:48:35+24:00',
  ),
);
const record = fc.oneof(
  fc.dictionary(fc.string({ maxLength: 8 }), fc.jsonValue({ maxDepth: 2 })),
  fc.constantFrom(null, [], 'text', 3, JSON.parse('{"__proto__":{"a":1}}'), { [Symbol('s')]: 1 }),
);
const receipt = fc.oneof(
  fc.record({
    policyVersion: fc.string({ maxLength: 5 }),
    rules: fc.array(fc.string({ maxLength: 5 }), { maxLength: 3 }),
    // [1], and an array with a hole at 0
    paths: fc.oneof(
      fc.array(fc.string({ maxLength: 5 }), { maxLength: 3 }),
      fc.constant([1]),
      fc.constant(new Array<string>(2).fill('a', 1)),
    ),
    counts: fc.oneof(fc.dictionary(fc.string({ maxLength: 5 }), num), fc.constant([])),
    keyIds: fc.array(fc.string({ maxLength: 5 }), { maxLength: 2 }),
  }),
  fc.constantFrom(null, {}, { policyVersion: 'p', rules: [], paths: [] }),
);

const valid = fc.record(
  {
    eventId: fc.string({ minLength: 1, maxLength: 64 }),
    taskId: fc.string({ minLength: 1, maxLength: 200 }),
    operationId: fc.string({ minLength: 1, maxLength: 255 }),
    actorType: fc.constantFrom('system', 'user', 'agent'),
    actorId: fc.string({ minLength: 1, maxLength: 200 }),
    action: fc.string({ minLength: 1, maxLength: 100 }),
    resourceType: fc.string({ minLength: 1, maxLength: 100 }),
    resourceId: fc.string({ minLength: 1, maxLength: 255 }),
    decision: fc.constantFrom('allow', 'deny', 'pending_confirmation'),
    reasonCode: fc.string({ minLength: 1, maxLength: 100 }),
    createdAt: fc
      .date({ noInvalidDate: true, min: new Date(0), max: new Date('2999-01-01') })
      .map((d) => d.toISOString()),
    seq: fc.nat(),
    phase: fc.constantFrom('intent', 'outcome'),
    epoch: fc.integer({ min: 1 }),
    attemptsMade: fc.nat(),
    details: fc.dictionary(fc.string({ maxLength: 8 }), fc.jsonValue({ maxDepth: 2 })),
  },
  {
    requiredKeys: [
      'eventId',
      'actorType',
      'actorId',
      'action',
      'resourceType',
      'resourceId',
      'decision',
      'createdAt',
      'phase',
    ],
  },
);

/** A valid event with one field replaced, removed, or added. */
const mutated = fc
  .tuple(
    valid,
    fc.constantFrom(
      'eventId',
      'taskId',
      'stepId',
      'operationId',
      'actorType',
      'actorId',
      'action',
      'resourceId',
      'decision',
      'reasonCode',
      'beforeStateRef',
      'createdAt',
      'seq',
      'phase',
      'epoch',
      'jobId',
      'queue',
      'stalledCounter',
      'details',
      'redaction',
      'extra',
      'toString',
      'constructor',
      'hasOwnProperty',
    ),
    fc.oneof(
      str(255),
      str(100),
      str(64),
      num,
      datetime,
      record,
      receipt,
      fc.constantFrom(undefined, 'system', 'deny', 'intent', true),
    ),
    fc.boolean(),
  )
  .map(([event, field, value, remove]) => {
    const copy: Record<string, unknown> = { ...event };
    if (remove) delete copy[field];
    else copy[field] = value;
    return copy;
  });

describe('the audit event fast check', () => {
  it('accepts every event the schema builds, so the fast path is taken', () => {
    fc.assert(
      fc.property(valid, (event) => {
        expect(auditEventSchema.safeParse(event).success).toBe(true);
        expect(isAuditEvent(event)).toBe(true);
      }),
      { numRuns: 500 },
    );
  });

  it('never accepts what the schema refuses, on events with one field changed, removed or added', () => {
    let refused = 0;
    let deferred = 0;
    fc.assert(
      fc.property(mutated, (event) => {
        const zod = auditEventSchema.safeParse(event).success;
        const fast = isAuditEvent(event);
        if (fast) expect(zod).toBe(true);
        // The fast check measures lengths in UTF-16 units, zod in code points: a string of
        // astral characters between the two limits goes to zod, which accepts it.
        if (zod && !fast) deferred++;
        const parses = (() => {
          try {
            parseAuditEvent(event);
            return true;
          } catch {
            return false;
          }
        })();
        expect(parses).toBe(zod);
        if (!zod) refused++;
      }),
      { numRuns: 5000 },
    );
    expect(refused).toBeGreaterThan(500); // the mutations really do reach the refusals
    expect(deferred).toBeLessThan(250);
  });

  it('sends shapes it does not handle itself to zod, which has the last word', () => {
    const base = {
      eventId: 'e1',
      actorType: 'system',
      actorId: 'worker:1',
      action: 'idempotency.claimed',
      resourceType: 'idempotency_key',
      resourceId: 'ns:k:v1',
      decision: 'allow',
      createdAt: '2026-11-30T20:48:35.000Z',
      phase: 'intent',
    };
    class Event {}
    const instance = Object.assign(new Event(), base);
    expect(isAuditEvent(instance)).toBe(false);
    expect(parseAuditEvent(instance)).toEqual(auditEventSchema.parse(instance));
    expect(() => parseAuditEvent({ ...base, actorType: 'robot' })).toThrow(/actorType/);
    expect(() => parseAuditEvent({ ...base, nope: 1 })).toThrow(/nope/);
  });
});

describe('event ids', () => {
  it('are stable: the ids already stored must be the ids a re-emit or a backfill computes', () => {
    // Pinned values: each part followed by NUL, SHA-256, base64url, 32 characters.
    expect(eventIdFor('acme:order%3A1:v1', 1, 'claimed', undefined)).toBe('rY_rFJB9rgYkxq-cjOuE2PRkxMjx4-Rl');
    expect(eventIdFor('ünïcödé ☃', 1, 'completed')).toBe('hRagHkzUZ8qlOQ-zAWzQBOMj1DrXIAm4');
    expect(eventIdFor('k', 1)).not.toBe(eventIdFor('k1'));
  });
});
