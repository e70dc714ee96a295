import { randomBytes, randomInt } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AuditEvent, eventIdFor } from '../../src/audit/audit-event.js';
import { AuditStore } from '../../src/audit/audit-store.js';
import { AUDIT_JOB_NAME } from '../../src/audit/batch-codec.js';
import { parseAuditEvent } from '../../src/audit/check-event.js';
import { AuditEmitter } from '../../src/audit/emitter.js';
import { auditEventFromWrapper } from '../../src/audit/from-wrapper.js';
import { isIdentifier } from '../../src/audit/identifier-grammar.js';
import { auditRedactor } from '../../src/audit/redact-event.js';
import { RetryableError } from '../../src/errors/processor-errors.js';
import { boundedKey, canonicalKey, type IdempotencyKey } from '../../src/keys/idempotency-key.js';
import type { PostgresLedger } from '../../src/ledger/postgres-ledger.js';
import { jobIdFor } from '../../src/operation/enqueue.js';
import { recogniseSummary } from '../../src/redaction/content-summary.js';
import { defineRedactionPolicy } from '../../src/redaction/define-policy.js';
import { HmacKeyring } from '../../src/redaction/hmac-keyring.js';
import { engineOf } from '../../src/redaction/policy-engine.js';
import { OMITTED_KEY } from '../../src/redaction/policy-schema.js';
import { redact } from '../../src/redaction/redact.js';
import { redactDetails } from '../../src/redaction/redact-details.js';
import { identifierRef, verifyRef } from '../../src/redaction/refs.js';
import { recordedError } from '../../src/sealing/sealed-error.js';
import type { WrapperEvent } from '../../src/worker/types.js';
import { bull } from '../helpers/bullmq.js';
import { TestContext, waitFor } from '../helpers/context.js';
import { testKeyring } from '../helpers/keyring.js';

const t = new TestContext('audit-structure');
const b = bull(t);
let ledger: PostgresLedger;

beforeAll(async () => {
  await t.setup();
  ledger = t.ledger();
});
afterAll(async () => {
  await ledger.close();
  await t.teardown();
});

const policy = defineRedactionPolicy({
  version: 'structure-1',
  hmacKeys: [{ id: 'k1', secret: randomBytes(32) }],
  details: { 'tool.charge': ['amount', 'currency', 'note', 'meta'] },
});
const redactEvent = auditRedactor(policy);
const REF = /^hmac:k1:[A-Za-z0-9_-]{43}$/;

// ---- values an attacker (or a careless processor) puts into clear-text fields ----------------

const hex = (bytes: number) => randomBytes(bytes).toString('hex');
const b64url = (bytes: number) => randomBytes(bytes).toString('base64url');
const pick = <T>(xs: readonly T[]): T => xs[randomInt(xs.length)] as T;
const digits = (n: number) => Array.from({ length: n }, () => randomInt(10)).join('');
const NAMES = ['jane', 'omar', 'li', 'anna', 'kofi', 'mia'];

/** Fresh secret-shaped and personal values: random tokens of several lengths and encodings, contacts, passwords, forged refs. */
function sensitiveValues(): [string, string][] {
  return [
    ['hex token (16 chars)', hex(8)],
    ['hex token (32 chars)', hex(16)],
    ['hex token (40 chars)', hex(20)],
    ['hex token (64 chars)', hex(32)],
    ['base64url token (24 bytes)', b64url(24)],
    ['base64url token (32 bytes)', b64url(32)],
    ['base64url token (48 bytes)', b64url(48)],
    ['base64 token (24 bytes)', randomBytes(24).toString('base64')],
    ['base64 token (33 bytes)', randomBytes(33).toString('base64')],
    ['prefixed API key', `sk_live_${b64url(24)}`],
    ['e-mail address', `${pick(NAMES)}.${hex(3)}@example.com`],
    ['e-mail address, upper case', `${pick(NAMES).toUpperCase()}${digits(3)}@Example.COM`],
    ['phone number', `+44 20 7946 ${digits(4)}`],
    ['phone number, dashed', `+1-555-${digits(3)}-${digits(4)}`],
    ['phone number, digits only', `4479${digits(8)}`],
    ['card number', `4111${digits(12)}`],
    ['password with spaces', `correct horse ${hex(3)} battery staple`],
    ['password with symbols', `P@ss-${hex(4)}!`],
    ['secret name, =, short value', `PGPASSWORD=${hex(3)}-1`],
    ['secret name, :, short value', `db.password:${hex(3)}`],
    ['weak secret name, =, short value', `api_key=${hex(3)}`],
    ['forged ref', `hmac:k1:${b64url(32).slice(0, 43)}`],
    ['forged opaque ref', `ref:k1:${b64url(16).slice(0, 22)}`],
    ['free text', `customer ${pick(NAMES)} asked to cancel order ${digits(5)}`],
  ];
}

/** Every clear-text field of an event, and ordinary values each must keep exactly. */
const ORDINARY: Record<string, readonly string[]> = {
  actorId: ['worker:host:123', 'assistant-7', 'user_123', '550e8400-e29b-41d4-a716-446655440000', 'backfill'],
  resourceId: ['order-2024-0001', 'products', 's3://bucket/reports/2024.csv', 'task:42'],
  action: ['tool.charge', 'tool.delete_bucket', 'idempotency.in_progress', 'payments.charge'],
  resourceType: ['idempotency_key', 'invoice', 'payment', 's3/object'],
  reasonCode: ['IDEMPOTENCY_CONFLICT', 'BULLMQ_MAX_STARTED_ATTEMPTS', 'policy.ok', 'human.required'],
  taskId: ['task:42', 'task-story', 'order-2024-0001', 'PROJ-42'],
  stepId: ['charge', 'send-receipt', 'step_3'],
  jobId: ['42', 'again', 'order-2024-0001'],
  queue: ['agent-actions', 'bullmq-idempotency-audit', 'charges'],
  operation: ['assets.create', 'mail.send', 'payments.charge'],
  operationId: ['acme%2Fassets.create:task%3A42:v1', 'acme:order:v1', 'task:42'],
  beforeStateRef: ['ledger:completed@3', 'ledger:locked@1', 'etag:v3'],
  afterStateRef: ['ledger:invalidated@12', 'ledger:unknown@2'],
};
const FIELDS = Object.keys(ORDINARY) as (keyof AuditEvent)[];

function decisionEvent(over: Partial<AuditEvent> = {}): AuditEvent {
  return {
    eventId: eventIdFor('structure', randomBytes(8).toString('hex')),
    actorType: 'agent',
    actorId: 'assistant-7',
    action: 'tool.charge',
    resourceType: 'payment',
    resourceId: 'pay_1',
    decision: 'allow',
    createdAt: new Date().toISOString(),
    phase: 'intent',
    taskId: 'task:42',
    operation: 'payments.charge',
    operationId: 'acme%2Fpayments.charge:task%3A42:v1',
    ...over,
  };
}

/** A system event as the wrapper makes it (the ledger's own transition). */
function systemEvent(over: Partial<AuditEvent> = {}): AuditEvent {
  return decisionEvent({
    actorType: 'system',
    actorId: 'worker:4242',
    action: 'idempotency.completed',
    resourceType: 'idempotency_key',
    resourceId: 'acme%2Fpayments.charge:task%3A42:v1',
    phase: 'outcome',
    ...over,
  });
}

/** The plaintext is nowhere in `value`, in any case. */
function expectAbsent(value: unknown, secret: string): void {
  const text = JSON.stringify(value);
  expect(text).not.toContain(secret);
  expect(text.toLowerCase()).not.toContain(secret.toLowerCase());
}

describe('clear-text fields follow their grammar', () => {
  for (const kind of ['decision', 'system'] as const) {
    it(`in ${kind} events, a secret-shaped or personal value in any field becomes a verifiable ref, nothing else leaks`, () => {
      for (const field of FIELDS) {
        for (const [what, secret] of sensitiveValues()) {
          const make = kind === 'decision' ? decisionEvent : systemEvent;
          const event = make({ [field]: secret });
          const out = redactEvent(event);
          const got = out[field] as string;
          expect(got, `${field} ← ${what}`).toMatch(REF);
          expect(verifyRef(got, secret, policy), `${field} ← ${what}`).toBe(true);
          expectAbsent(out, secret);
          expect(out.redaction?.rules).toContain('grammar.ref');
          expect(out.redaction?.paths).toContain(`$.${field}`);
          // Still a valid event: nothing dropped, required fields non-empty.
          expect(parseAuditEvent(out)).toBe(out);
          // And idempotent: the writer or a backfill may redact it again.
          expect(redactEvent(out)).toEqual(out);
        }
      }
    });
  }

  it('ordinary ids stay exactly readable, in every field', () => {
    for (const field of FIELDS) {
      for (const value of ORDINARY[field as string] ?? []) {
        const out = redactEvent(decisionEvent({ [field]: value }));
        expect(out[field], `${field} = ${value}`).toBe(value);
        expect(out.redaction?.rules ?? []).not.toContain('grammar.ref');
      }
    }
  });

  it("the library's own events pass as they are: keys, hashed keys, idem_ job ids, ledger state refs", () => {
    const key: IdempotencyKey = { namespace: 'acme/payments.charge', resourceKey: 'order:o-2024-7', version: 'v1' };
    const long: IdempotencyKey = { ...key, resourceKey: `batch/${'item-7/'.repeat(60)}` };
    for (const k of [key, long]) {
      const wrapper: WrapperEvent = {
        type: 'completed',
        operation: 'payments.charge',
        key: boundedKey(k),
        epoch: 3,
        decision: 'allow',
        jobId: jobIdFor(k),
        queue: 'charges',
        taskId: 'task:42',
        attemptsMade: 1,
        attemptsStarted: 2,
        stalledCounter: 0,
      };
      const event = auditEventFromWrapper(wrapper, 'worker:host-1:4242');
      const out = redactEvent(event);
      expect(out).toEqual(event);
      expect(out.afterStateRef).toBe('ledger:completed@3');
      expect(out.resourceId).toBe(boundedKey(k));
      expect(out.jobId).toBe(jobIdFor(k));
    }
    expect(boundedKey(long)).toContain('#');
    // A step's key carries `#step=<name>`, encoded.
    const step = boundedKey({ ...key, resourceKey: `${key.resourceKey}#step=charge` });
    expect(redactEvent(systemEvent({ resourceId: step, stepId: 'charge' })).resourceId).toBe(step);
  });

  it('look-alikes of the library forms do not pass: a token as idem_ job id, a key carrying an e-mail, a hashed key in a tool decision', () => {
    const forgedJob = `idem_${b64url(32).slice(0, 43)}`;
    const out = redactEvent(systemEvent({ jobId: forgedJob }));
    expect(out.jobId).toMatch(REF);
    expect(verifyRef(out.jobId as string, forgedJob, policy)).toBe(true);
    // The job id of another key is not this event's.
    const other = jobIdFor({ namespace: 'acme', resourceKey: 'other', version: 'v1' });
    expect(redactEvent(systemEvent({ jobId: other })).jobId).toMatch(REF);

    const email = `${pick(NAMES)}.${hex(3)}@example.com`;
    const leaky = canonicalKey({ namespace: 'acme/mail.send', resourceKey: `mail:${email}`, version: 'v1' });
    const keyed = redactEvent(systemEvent({ resourceId: leaky, operationId: leaky }));
    expect(keyed.resourceId).toMatch(REF);
    expect(keyed.operationId).toBe(keyed.resourceId);
    expectAbsent(keyed, email);
    expectAbsent(keyed, encodeURIComponent(email));

    // 200 plain characters, `#` and 43 of a secret: the hashed form is the library's only for its own key events.
    const smuggled = `${'a'.repeat(200)}#${b64url(32).slice(0, 43)}`;
    expect(redactEvent(decisionEvent({ resourceId: smuggled })).resourceId).toMatch(REF);
  });

  it('a ref made by the policy stays as it is; one of an unknown key is referenced again', () => {
    const ref = identifierRef('user_123@example.com', policy);
    const out = redactEvent(decisionEvent({ actorId: ref }));
    expect(out.actorId).toBe(ref);
    expect(out.redaction?.keyIds).toEqual(['k1']);
    const foreign = identifierRef(
      'user_123',
      defineRedactionPolicy({ version: 'x', hmacKeys: [{ id: 'k1', secret: randomBytes(32) }] }),
    );
    const again = redactEvent(decisionEvent({ actorId: foreign }));
    expect(again.actorId).not.toBe(foreign);
    expect(verifyRef(again.actorId, foreign, policy)).toBe(true);
  });

  it('an event id that is not an id becomes a keyed digest of the same length, stable across redactions', () => {
    const email = `${pick(NAMES)}@example.com`;
    const out = redactEvent(decisionEvent({ eventId: email }));
    expect(out.eventId).toMatch(/^[A-Za-z0-9_-]{32}$/);
    expect(redactEvent(decisionEvent({ eventId: email })).eventId).toBe(out.eventId);
    expect(redactEvent(out)).toEqual(out);
    expectAbsent(out, email);
  });

  it('the grammar refuses random tokens, and keeps the ids of the brief', () => {
    for (let i = 0; i < 200; i++) {
      for (const token of [hex(8), hex(16), b64url(24), b64url(32), randomBytes(24).toString('base64')]) {
        expect(isIdentifier(token, 255), token).toBe(false);
      }
    }
    for (const id of Object.values(ORDINARY).flat()) {
      if (!id.includes('%') && !id.startsWith('ledger:')) expect(isIdentifier(id, 255), id).toBe(true);
    }
  });

  it("a value in the library's reference forms is never an identifier, however ordinary its body", () => {
    for (const v of ['ref:k1:orders', 'hmac:k1:task-42', 'ref:k2:11eyjsosd4dy_owzGZgmzw', 'hmac:x:1']) {
      expect(isIdentifier(v, 255), v).toBe(false);
    }
    expect(isIdentifier('refund:k1:42', 255)).toBe(true);
  });
});

describe("the codes of a processor's errors", () => {
  it('a RetryableError without a code of its own is released with a clean code, told in clear (no ref)', () => {
    const key = boundedKey({ namespace: 'acme/pay', resourceKey: 'order:7', version: 'v1' });
    const cases: [RetryableError, string][] = [
      [new RetryableError('upstream timeout'), 'RETRYABLE'],
      [new RetryableError('rate limited', { code: 'UPSTREAM_RATE_LIMITED' }), 'UPSTREAM_RATE_LIMITED'],
    ];
    for (const [err, code] of cases) {
      const recorded = recordedError(err, testKeyring, { operation: 'pay', key });
      expect(recorded.code).toBe(code);
      const wrapper: WrapperEvent = {
        type: 'released',
        operation: 'pay',
        key,
        epoch: 1,
        decision: 'allow',
        reasonCode: recorded.code,
        attemptsMade: 0,
        attemptsStarted: 1,
        stalledCounter: 0,
      };
      const out = redactEvent(auditEventFromWrapper(wrapper, 'worker:1'));
      expect(out.reasonCode).toBe(code);
      expect(out.redaction).toBeUndefined();
    }
  });
});

describe('details', () => {
  it('omitted keys are counted, never named, and earlier summaries (with names) are merged into the count', () => {
    const email = `${pick(NAMES)}.${hex(3)}@example.com`;
    const token = b64url(24);
    const details = { amount: 12, [email]: true, [token]: 1, customerName: 'Jane Doe', internalNote: 'x' };
    const out = redactEvent(decisionEvent({ details }));
    expect(out.details).toEqual({ amount: 12, [OMITTED_KEY]: { count: 4 } });
    for (const name of [email, token, 'customerName', 'internalNote', 'Jane Doe']) expectAbsent(out, name);
    expect(redactEvent(out)).toEqual(out);

    const old = { amount: 1, [OMITTED_KEY]: { keys: ['note', email], count: 3 }, [`${hex(2)}@x.io`]: 2 };
    const merged = redactDetails('tool.charge', old, policy).value;
    expect(merged).toEqual({ amount: 1, [OMITTED_KEY]: { count: 4 } });
    expectAbsent(merged, email);
  });

  it('an action that is not an action name keeps only what every action may keep, before and after its ref', () => {
    const out = redactEvent(decisionEvent({ action: 'Tool Charge!', details: { amount: 3 } }));
    expect(out.action).toMatch(REF);
    expect(out.details).toEqual({ [OMITTED_KEY]: { count: 1 } });
    expect(redactEvent(out)).toEqual(out);
  });

  it('text longer than 200 characters becomes a content summary; short text stays', () => {
    const prose = `Dear ${pick(NAMES)}, ${'the agent checked the invoice and found a mismatch. '.repeat(5)}${hex(8)}`;
    const out = redactEvent(
      decisionEvent({ details: { note: prose, meta: { list: ['short', prose] }, currency: 'EUR' } }),
    );
    const d = out.details as { note: unknown; meta: { list: unknown[] }; currency: string };
    const keyring = engineOf(policy).keyring;
    expect(recogniseSummary(d.note, keyring)).toBe('k1');
    expect(d.note).toMatchObject({ bytes: Buffer.byteLength(prose), type: 'text' });
    expect(keyring.verify((d.note as { hash: string }).hash, prose, 'content')).toBe(true);
    expect(d.meta.list[0]).toBe('short');
    expect(recogniseSummary(d.meta.list[1], keyring)).toBe('k1');
    expect(d.currency).toBe('EUR');
    expectAbsent(out, prose.slice(0, 60));
    expect(out.redaction?.rules).toContain('details.long_text');
    expect(redactEvent(out)).toEqual(out);
  });
});

describe('references are verified, not trusted', () => {
  const ring = new HmacKeyring([
    { id: 'k2', secret: randomBytes(32) },
    { id: 'k1', secret: randomBytes(32) },
  ]);

  it('a forged or altered ref of the right shape is not recognised; a real one is, under any key of the ring', () => {
    const real = ring.identifierRef('user_123');
    expect(real).toMatch(/^hmac:k2:[A-Za-z0-9_-]{43}$/);
    expect(ring.recognise(real, 'hmac')).toBe('k2');
    expect(ring.verify(real, 'user_123', 'identifier')).toBe(true);
    expect(ring.verify(real, 'user_124', 'identifier')).toBe(false);
    for (let i = 0; i < 50; i++) {
      expect(ring.recognise(`hmac:k1:${b64url(32).slice(0, 43)}`, 'hmac')).toBeUndefined();
      expect(ring.recognise(`ref:k1:${b64url(16).slice(0, 22)}`, 'ref')).toBeUndefined();
    }
    // One character of the digest part changed: the check no longer matches.
    const body = real.slice(8);
    const altered = `hmac:k2:${body[0] === 'A' ? 'B' : 'A'}${body.slice(1)}`;
    expect(ring.recognise(altered, 'hmac')).toBeUndefined();
    const opaque = ring.opaqueRef('vault/stripe');
    expect(opaque).toMatch(/^ref:k2:[A-Za-z0-9_-]{22}$/);
    expect(ring.recognise(opaque, 'ref')).toBe('k2');
    expect(ring.verify(opaque, 'vault/stripe', 'credential_ref')).toBe(true);
    // A rotated-out key's refs stay recognised.
    const older = new HmacKeyring([{ id: 'k1', secret: Buffer.alloc(32, 7) }]);
    const rotated = new HmacKeyring([
      { id: 'k3', secret: randomBytes(32) },
      { id: 'k1', secret: Buffer.alloc(32, 7) },
    ]);
    expect(rotated.recognise(older.identifierRef('u1'), 'hmac')).toBe('k1');
  });

  it('a forged ref under an identifier field or as a content hash is referenced again, not kept', () => {
    const forged = `hmac:k1:${b64url(32).slice(0, 43)}`;
    const out = redact({ userId: forged, doc: { bytes: 3, hash: forged, type: 'text' } }, policy).value as {
      userId: string;
      doc: { hash: string };
    };
    expect(out.userId).not.toBe(forged);
    expect(verifyRef(out.userId, forged, policy)).toBe(true);
    expect(recogniseSummary({ bytes: 3, hash: forged, type: 'text' }, engineOf(policy).keyring)).toBeUndefined();
  });
});

describe('dead letters (writer, Postgres, Redis)', () => {
  it("a dead-lettered event's reason is codes, SQLSTATEs and schema paths: no value quoted, no key named", async () => {
    const queue = b.queue('audit-dl');
    const emitter = new AuditEmitter({ queue, pool: ledger.pool, schema: t.schema, redact: (e) => e });
    const secret = b64url(24);
    const email = `${pick(NAMES)}.${hex(3)}@example.com`;
    const bad = [
      // Unknown fields named by data, a wrong enum value, a bad receipt count under a data key.
      { ...decisionEvent(), [email]: secret, decision: `maybe-${secret}` },
      { ...decisionEvent(), redaction: { policyVersion: 'v', rules: [], paths: [], counts: { [email]: secret } } },
      { ...decisionEvent(), createdAt: `yesterday ${secret}`, actorId: '' },
    ];
    const writer = b.auditWriter('audit-dl', ledger.pool, { redactionPolicy: policy });
    await queue.add(AUDIT_JOB_NAME, { events: bad });
    // A valid event Postgres refuses (a NUL), with a secret in a detail the policy does not allow.
    emitter.record(decisionEvent({ taskId: 'task-dl', details: { note: 'a\u0000b', comment: secret } }));
    await emitter.flush();
    const rows = () => t.query(`select reason, event::text as event from ${t.schema}.audit_dead_letter`);
    await waitFor(async () => (await rows()).rows.length === 4, 'four dead letters');
    const dl = (await rows()).rows;
    const reasons = dl.map((r) => r.reason as string).sort();
    expect(reasons).toEqual([
      // The empty actor id is normalised (a keyed ref); the time cannot be, so the event is refused.
      'AUDIT_EVENT_INVALID issues=invalid_format@createdAt',
      'AUDIT_EVENT_INVALID issues=invalid_type@redaction.counts.*',
      'AUDIT_EVENT_INVALID issues=invalid_value@decision,unrecognized_keys@$',
      'AUDIT_EVENT_REFUSED sqlstate=22P05',
    ]);
    for (const r of reasons) {
      expect(r).toMatch(/^[A-Z_]+( [a-z]+=[A-Za-z0-9_@.*$,]+)+$/);
      expectAbsent(r, secret);
      expectAbsent(r, email);
    }
    // The dead-lettered events themselves keep neither the secret nor the e-mail in clear:
    // invalid values are refs, unknown fields and an invalid receipt are counted.
    for (const r of dl) {
      expectAbsent(r.event, secret);
      expectAbsent(r.event, email);
    }
    const events = dl.map((r) => JSON.parse(r.event) as Record<string, unknown>);
    const first = events.find((e) => typeof e.decision === 'string' && e.decision.startsWith('hmac:'));
    expect(verifyRef(first?.decision as string, `maybe-${secret}`, policy)).toBe(true);
    expect(first?.[OMITTED_KEY]).toEqual({ count: 1 });
    const second = events.find((e) => e.redaction === undefined && e.decision === 'allow' && e[OMITTED_KEY]);
    expect(second?.[OMITTED_KEY]).toEqual({ count: 1 });
    const third = events.find((e) => typeof e.createdAt === 'string' && e.createdAt.startsWith('hmac:'));
    expect(verifyRef(third?.createdAt as string, `yesterday ${secret}`, policy)).toBe(true);
    expect(third?.actorId).toMatch(REF);
    // The refused event keeps what the policy allows of its details, made storable.
    const refused = events.find((e) => e.taskId === 'task-dl');
    expect(refused?.details).toEqual({ note: 'a\uFFFDb', [OMITTED_KEY]: { count: 1 } });
    await emitter.close();
    await writer.close();
    await queue.close();
  });

  it('an undecodable batch is dead-lettered by its shape: a stable cause, foreign field names counted, a job id that is no id referenced', async () => {
    const queue = b.queue('audit-undecodable');
    const email = `${pick(NAMES)}.${hex(3)}@example.com`;
    const jobId = `batch for ${email}`;
    await queue.add(
      AUDIT_JOB_NAME,
      { encoding: `gzip ${email}`, count: 2, payload: 'bm90IGRlZmxhdGU=', [email]: 1 },
      { jobId },
    );
    const writer = b.auditWriter('audit-undecodable', ledger.pool, { redactionPolicy: policy });
    const rows = () =>
      t.query(`select reason, event from ${t.schema}.audit_dead_letter where event->>'undecodableBatch' = 'true'`);
    await waitFor(async () => (await rows()).rows.length === 1, 'the batch dead-lettered');
    const [row] = (await rows()).rows;
    expect(row?.reason).toBe('AUDIT_BATCH_UNDECODABLE cause=not_a_batch');
    expect(row?.event).toMatchObject({
      fields: ['encoding', 'count', 'payload'],
      otherFields: 1,
      encoding: 'other',
      count: 2,
    });
    expect(verifyRef(row?.event.jobId, jobId, policy)).toBe(true);
    expectAbsent(row, email);
    await writer.close();
    await queue.close();
  });

  it('end to end: a tool decision with secret-shaped fields is stored with refs only, verifiable, and the store still finds nothing in clear', async () => {
    const queue = b.queue('audit-e2e');
    const emitter = new AuditEmitter({ queue, pool: ledger.pool, schema: t.schema, redact: redactEvent });
    const writer = b.auditWriter('audit-e2e', ledger.pool, { redactionPolicy: policy });
    const email = `${pick(NAMES)}.${hex(3)}@example.com`;
    const token = b64url(32);
    const phone = `+44 20 7946 ${digits(4)}`;
    const key: IdempotencyKey = { namespace: 'acme/payments.charge', resourceKey: 'order:e2e-1', version: 'v1' };
    const base = {
      operation: 'payments.charge',
      key: boundedKey(key),
      epoch: 1,
      jobId: jobIdFor(key),
      queue: 'charges',
      taskId: 'task-e2e',
      attemptsMade: 0,
      attemptsStarted: 1,
      stalledCounter: 0,
    };
    emitter.emit({ ...base, type: 'claimed', decision: 'allow' });
    // A task id that is no identifier is stored as its ref, and still found by the store.
    const ticket = `ticket for ${email}`;
    emitter.emit({ ...base, taskId: ticket, type: 'decision', decision: 'allow', seq: 5, details: { amount: 1 } });
    // What ctx.audit() hands the wrapper: the decision's own fields become the event's columns.
    emitter.emit({
      ...base,
      type: 'decision',
      decision: 'deny',
      seq: 0,
      reasonCode: `denied for ${email}`,
      details: {
        action: 'tool.charge',
        actorType: 'user',
        actorId: email,
        resourceType: 'payment',
        resourceId: token,
        amount: 5,
        [phone]: 'omitted key named by data',
      },
    });
    await emitter.flush();
    await waitFor(
      async () =>
        Number(
          (await t.query(`select count(*) from ${t.schema}.audit_events where task_id = 'task-e2e'`)).rows[0]?.count,
        ) === 2,
      'two events stored',
    );
    const stored = await t.query(
      `select t::text as row, t.* from ${t.schema}.audit_events t where task_id = 'task-e2e' order by seq`,
    );
    const all = stored.rows.map((r) => r.row).join('\n');
    for (const secret of [email, token, phone, 'omitted key named by data']) expectAbsent(all, secret);
    const decision = stored.rows[1] as { actor_id: string; resource_id: string; reason_code: string; details: unknown };
    expect(verifyRef(decision.actor_id, email, policy)).toBe(true);
    expect(verifyRef(decision.resource_id, token, policy)).toBe(true);
    expect(verifyRef(decision.reason_code, `denied for ${email}`, policy)).toBe(true);
    expect(decision.details).toEqual({ amount: 5, [OMITTED_KEY]: { count: 1 } });
    // The library's own fields are readable.
    expect(stored.rows[0]).toMatchObject({ resource_id: boundedKey(key), job_id: jobIdFor(key), queue: 'charges' });
    const store = new AuditStore(ledger.pool, t.schema, policy);
    expect((await store.events({ taskId: 'task-e2e' })).map((e) => e.action)).toEqual([
      'idempotency.claimed',
      'tool.charge',
    ]);
    const byTicket = await store.events({ taskId: ticket });
    expect(byTicket).toHaveLength(1);
    expect(verifyRef(byTicket[0]?.taskId as string, ticket, policy)).toBe(true);
    expectAbsent(
      (await t.query(`select t::text as row from ${t.schema}.audit_events t`)).rows.map((r) => r.row),
      email,
    );
    await emitter.close();
    await writer.close();
    await queue.close();
  });
});

describe('the store holds every event to the grammars, whoever made it', () => {
  it("details written straight to the store are redacted by the emitters' policy; an emitter's event lands as it left the emitter", async () => {
    const store = new AuditStore(ledger.pool, t.schema, policy);
    const email = `${pick(NAMES)}.${hex(3)}@example.com`;
    const token = `sk_live_${b64url(18)}`;
    const base: AuditEvent = {
      eventId: eventIdFor('store-details', hex(4)),
      actorType: 'user',
      actorId: 'alice',
      action: 'idempotency.invalidated',
      resourceType: 'idempotency_key',
      resourceId: 'acme:order%3A9:v1',
      decision: 'allow',
      createdAt: new Date().toISOString(),
      taskId: 'task-store-details',
      phase: 'outcome',
      details: { via: 'library', previousStatus: 'completed', reason: `asked by ${email}`, password: token },
    };
    const decision: AuditEvent = {
      ...base,
      eventId: eventIdFor('store-details', hex(4)),
      actorType: 'agent',
      action: 'tool.charge',
      details: { amount: 5, note: `card holder ${email}, key ${token}` },
    };
    const emitted = redactEvent({ ...decision, eventId: eventIdFor('store-details', hex(4)) });
    expect(await store.writeBatch([base, decision, emitted])).toMatchObject({ inserted: 3, deadLettered: 0 });
    const rows = (
      await t.query(`select event_id, details from ${t.schema}.audit_events where task_id = 'task-store-details'`)
    ).rows as { event_id: string; details: Record<string, unknown> }[];
    const byId = new Map(rows.map((r) => [r.event_id, r.details]));
    const all = JSON.stringify(rows);
    expectAbsent(all, email);
    expectAbsent(all, token);
    // The library's own facts stay readable; the reason's address is masked, the password gone.
    expect(byId.get(base.eventId)).toMatchObject({ via: 'library', previousStatus: 'completed' });
    expect(byId.get(base.eventId)?.reason).toMatch(/^asked by .*@example\.com$/);
    expect(byId.get(decision.eventId)).toMatchObject({ amount: 5 });
    // What an emitter redacted is stored as it is.
    expect(byId.get(emitted.eventId)).toEqual(emitted.details);
  });

  it('an event written straight to the store (the CLI, the backfill) with dirty fields lands with refs', async () => {
    const store = new AuditStore(ledger.pool, t.schema, policy);
    const values = sensitiveValues();
    const events: AuditEvent[] = values.map(([, v], i) => ({
      eventId: eventIdFor('store-direct', i),
      actorType: 'user',
      actorId: v,
      action: 'idempotency.invalidated',
      resourceType: 'idempotency_key',
      resourceId: v,
      decision: 'allow',
      createdAt: new Date().toISOString(),
      taskId: v,
      jobId: v,
      queue: v,
      seq: i,
      phase: 'outcome',
    }));
    const clean: AuditEvent = {
      ...(events[0] as AuditEvent),
      eventId: eventIdFor('store-direct', 'clean'),
      actorId: 'alice',
      resourceId: 'task:42',
      taskId: 'task-42',
      jobId: 'job-1',
      queue: 'mail',
    };
    const result = await store.writeBatch([...events, clean]);
    expect(result.inserted).toBe(events.length + 1);
    const rows = await t.query(`select t::text as row from ${t.schema}.audit_events t`);
    const text = rows.rows.map((r) => r.row).join('\n');
    for (const [what, v] of values) expect(text.includes(v), what).toBe(false);
    const stored = await t.query(
      `select actor_id, task_id, job_id, queue from ${t.schema}.audit_events where event_id = $1`,
      [events[0]?.eventId],
    );
    const row = stored.rows[0] as Record<string, string>;
    for (const col of ['actor_id', 'task_id', 'job_id', 'queue']) {
      expect(verifyRef(row[col] as string, values[0]?.[1] as string, policy), col).toBe(true);
    }
    const ok = await t.query(
      `select actor_id, task_id, job_id, queue from ${t.schema}.audit_events where event_id = $1`,
      [clean.eventId],
    );
    expect(ok.rows[0]).toEqual({ actor_id: 'alice', task_id: 'task-42', job_id: 'job-1', queue: 'mail' });
  });
});
