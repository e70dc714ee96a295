/**
 * Operators identified by JWTs of an identity provider. The provider's keys are served by a real
 * JWKS server (node:http, counting its fetches); tokens are signed with keys made by jose's
 * generateKeyPair. The operations process is started from the environment and called over HTTP;
 * requests and answers are read back from Postgres, parked jobs from BullMQ.
 */
import { createHash, createPublicKey, randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Queue } from 'bullmq';
import { type CryptoKey, exportJWK, generateKeyPair, type JWK, SignJWT } from 'jose';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/env.js';
import { ConfirmationStore, type NewConfirmation } from '../../src/confirm/confirmation-store.js';
import { confirmationHttpHandler } from '../../src/confirm/http-handler.js';
import { type OperationsProcess, startOperationsProcess } from '../../src/ops/operations-process.js';
import { TestContext } from '../helpers/context.js';

const t = new TestContext('confirm_jwt');
let pool: pg.Pool;
let store: ConfirmationStore;
let queue: Queue;
let redis: ReturnType<TestContext['redis']>;
let n = 0;

const QUEUE = 'refunds';
const ISSUER = 'https://login.example.test/';
const AUDIENCE = 'bullmq-idempotency';

type Pair = { publicKey: CryptoKey; privateKey: CryptoKey; kid: string; alg: string };
let rsa: Pair; // in the served JWKS
let ec: Pair; // in the served JWKS
let stranger: Pair; // never published
let publicJwks: { keys: JWK[] };

let jwks: Server;
let jwksUrl: string;
let jwksFetches = 0;

async function pair(alg: 'RS256' | 'ES256', kid: string): Promise<Pair> {
  const { publicKey, privateKey } = await generateKeyPair(alg, { extractable: true });
  return { publicKey, privateKey, kid, alg };
}

type Claims = Record<string, unknown>;

/** A token signed by `key`: valid for alice over acme/payments.* unless told otherwise. */
function token(over: { claims?: Claims; key?: Pair; iss?: string; aud?: string; exp?: number | null } = {}) {
  const key = over.key ?? rsa;
  const jwt = new SignJWT({ sub: 'alice', bqi_namespaces: ['acme/payments.*'], ...over.claims })
    .setProtectedHeader({ alg: key.alg, kid: key.kid })
    .setIssuer(over.iss ?? ISSUER)
    .setAudience(over.aud ?? AUDIENCE)
    .setIssuedAt();
  if (over.exp !== null) jwt.setExpirationTime(over.exp ?? Math.floor(Date.now() / 1000) + 300);
  return jwt.sign(key.privateKey);
}

const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');

function request(namespace: string): NewConfirmation {
  n++;
  return {
    operationKey: `${encodeURIComponent(namespace)}:${encodeURIComponent(`order:o-${n}`)}:v1`,
    name: 'large-refund',
    operation: 'payments.refund',
    reason: `refund for order o-${n}`,
    onTimeout: 'deny',
    timeoutMs: 3_600_000,
    taskId: `task-${n}`,
    jobId: `job-jwt-${n}`,
    queue: QUEUE,
    epoch: 1,
  };
}

async function parked(namespace: string) {
  const c = await store.request(request(namespace));
  const job = await queue.add('refund', { n }, { jobId: c.jobId as string, delay: 3_600_000 });
  await store.addWaiter(c.id, { queue: QUEUE, jobId: job.id as string });
  return { c, job };
}

const baseEnv = () => ({
  DATABASE_URL: t.databaseUrl,
  REDIS_URL: t.redisUrl,
  BQI_SCHEMA: t.schema,
  BQI_PREFIX: t.prefix,
  BQI_AUDIT_QUEUE: 'audit-jwt',
  BQI_HTTP_PORT: '0',
  BQI_HTTP_HOST: '127.0.0.1',
  LOG_LEVEL: 'silent',
});

const jwtEnv = () => ({
  BQI_OPERATOR_JWT_ISSUER: ISSUER,
  BQI_OPERATOR_JWT_AUDIENCE: AUDIENCE,
  BQI_OPERATOR_JWKS_URL: jwksUrl,
});

const call = (url: string, bearer: string | undefined, body?: unknown) =>
  fetch(url, {
    method: body === undefined ? 'GET' : 'POST',
    headers: {
      ...(bearer ? { authorization: `Bearer ${bearer}` } : {}),
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });

async function json(res: Response): Promise<Record<string, unknown>> {
  return (await res.json()) as Record<string, unknown>;
}

async function answerEvents(id: string) {
  return (
    await t.query(
      `select actor_type, actor_id, decision from ${t.schema}.audit_events
       where resource_id = $1 and action = 'confirmation.answer'`,
      [id],
    )
  ).rows;
}

async function listen(server: Server): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as AddressInfo).port;
}
const stop = (server: Server) => new Promise<void>((resolve) => server.close(() => resolve()));

beforeAll(async () => {
  await t.setup();
  pool = t.pool();
  store = new ConfirmationStore(pool, t.schema);
  redis = t.redis();
  queue = new Queue(QUEUE, { connection: redis, prefix: t.prefix });
  [rsa, ec, stranger] = await Promise.all([pair('RS256', 'rsa-1'), pair('ES256', 'ec-1'), pair('RS256', 'rsa-x')]);
  publicJwks = {
    keys: await Promise.all(
      [rsa, ec].map(async (k) => ({ ...(await exportJWK(k.publicKey)), kid: k.kid, alg: k.alg, use: 'sig' })),
    ),
  };
  jwks = createServer((req, res) => {
    jwksFetches++;
    if (req.url !== '/.well-known/jwks.json') {
      res.statusCode = 404;
      return res.end();
    }
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify(publicJwks));
  });
  jwksUrl = `http://127.0.0.1:${await listen(jwks)}/.well-known/jwks.json`;
});
afterAll(async () => {
  await stop(jwks);
  await queue.close();
  await redis.quit();
  if (redis.status !== 'end') await new Promise((resolve) => redis.once('end', resolve));
  await pool.end();
  await t.teardown();
});

describe('operator JWTs (BQI_OPERATOR_JWT_*, keys from a JWKS URL)', () => {
  let ops: OperationsProcess;
  let url: string;
  const named = `bqi_op_${randomBytes(32).toString('base64url')}`;
  beforeAll(async () => {
    const entry = `actor=bob;namespaces=acme/refunds.issue;sha256=${createHash('sha256').update(named).digest('hex')}`;
    ops = await startOperationsProcess(loadConfig({ ...baseEnv(), ...jwtEnv(), BQI_OPERATORS: entry }));
    url = `http://127.0.0.1:${ops.http?.address?.port}/confirmations`;
  });
  afterAll(async () => {
    await ops.close();
  });

  it("a token scoped to one namespace answering another namespace's request: 403, nothing answered, nothing woken", async () => {
    const { c, job } = await parked('acme/refunds.issue');
    const res = await call(`${url}/${c.id}`, await token(), { decision: 'approve', reason: 'looks fine' });
    expect(res.status).toBe(403);
    expect((await json(res)).code).toBe('NAMESPACE_NOT_ALLOWED');
    expect(await store.get(c.id)).toMatchObject({ status: 'pending', answeredBy: null });
    expect(await answerEvents(c.id)).toEqual([]);
    expect(await job.isDelayed()).toBe(true);
    expect((await call(`${url}/${c.id}`, await token())).status).toBe(403);
    const listed = (await json(await call(`${url}?pending=true`, await token()))).confirmations as { id: string }[];
    expect(listed.map((x) => x.id)).not.toContain(c.id);

    // A token of that namespace answers it (the named token beside the JWTs too).
    const carol = await token({ claims: { sub: 'carol', bqi_namespaces: ['acme/refunds.issue'] } });
    const ok = await call(`${url}/${c.id}`, carol, { decision: 'approve', reason: 'checked' });
    expect(ok.status).toBe(200);
    expect(await json(ok)).toMatchObject({ recorded: true, woken: 1, confirmation: { answeredBy: 'carol' } });
    expect(await job.isDelayed()).toBe(false);
    const other = await store.request(request('acme/refunds.issue'));
    expect((await call(`${url}/${other.id}`, named, { decision: 'deny', reason: 'no' })).status).toBe(200);
    expect((await store.get(other.id)).answeredBy).toBe('bob');
  });

  it("the actor recorded is the token's subject, never the body's: a body naming one is refused, nothing recorded", async () => {
    const c = await store.request(request('acme/payments.refund'));
    const mallory = await call(`${url}/${c.id}`, await token(), { decision: 'approve', actor: 'mallory', reason: 'x' });
    expect(mallory.status).toBe(400);
    expect((await json(mallory)).code).toBe('ACTOR_NOT_ACCEPTED');
    expect((await store.get(c.id)).status).toBe('pending');

    const es = await token({ key: ec });
    const ok = await call(`${url}/${c.id}`, es, { decision: 'deny', reason: 'over the limit' });
    expect(ok.status).toBe(200);
    expect((await store.get(c.id)).answeredBy).toBe('alice');
    expect(await answerEvents(c.id)).toEqual([{ actor_type: 'user', actor_id: 'alice', decision: 'deny' }]);
  });

  it('refused tokens: 401 with a stable code each, the request left pending', async () => {
    const { c, job } = await parked('acme/payments.refund');
    const now = Math.floor(Date.now() / 1000);
    const good = await token();
    const [header, payload] = good.split('.');
    const rsaPem = createPublicKey({ key: publicJwks.keys[0] as JWK & { kty: 'RSA' }, format: 'jwk' })
      .export({ format: 'pem', type: 'spki' })
      .toString();
    const hsWithPublicKey = await new SignJWT({ sub: 'alice', bqi_namespaces: ['*'] })
      .setProtectedHeader({ alg: 'HS256', kid: rsa.kid })
      .setIssuer(ISSUER)
      .setAudience(AUDIENCE)
      .setExpirationTime('5m')
      .sign(new TextEncoder().encode(rsaPem));
    const cases: [string, string, string][] = [
      ['expired', await token({ exp: now - 3600 }), 'TOKEN_EXPIRED'],
      ['another issuer', await token({ iss: 'https://evil.example.test/' }), 'TOKEN_CLAIM_INVALID'],
      ['another audience', await token({ aud: 'another-service' }), 'TOKEN_CLAIM_INVALID'],
      ['no expiry', await token({ exp: null }), 'TOKEN_CLAIM_INVALID'],
      ['no subject', await token({ claims: { sub: undefined } }), 'TOKEN_CLAIM_INVALID'],
      ['a subject with white space', await token({ claims: { sub: 'alice smith' } }), 'TOKEN_CLAIM_INVALID'],
      ['namespaces not strings', await token({ claims: { bqi_namespaces: [1] } }), 'TOKEN_CLAIM_INVALID'],
      ['a key the provider never published', await token({ key: stranger }), 'TOKEN_KEY_UNKNOWN'],
      [
        'signed by another key under a published kid',
        await token({ key: { ...stranger, kid: rsa.kid } }),
        'TOKEN_SIGNATURE_INVALID',
      ],
      ['alg none', `${b64({ alg: 'none' })}.${payload}.`, 'TOKEN_ALGORITHM_NOT_ALLOWED'],
      [
        'alg none, signature kept',
        `${b64({ alg: 'none', kid: rsa.kid })}.${payload}.${good.split('.')[2]}`,
        'TOKEN_ALGORITHM_NOT_ALLOWED',
      ],
      ['HS256 keyed with the public key', hsWithPublicKey, 'TOKEN_ALGORITHM_NOT_ALLOWED'],
      [
        'the claims changed after signing',
        `${header}.${b64({ sub: 'alice', bqi_namespaces: ['*'], iss: ISSUER, aud: AUDIENCE, exp: now + 300 })}.${good.split('.')[2]}`,
        'TOKEN_SIGNATURE_INVALID',
      ],
      ['a header that is not JSON', `${Buffer.from('{nope').toString('base64url')}.${payload}.AAAA`, 'TOKEN_MALFORMED'],
    ];
    for (const [what, bearer, code] of cases) {
      const res = await call(`${url}/${c.id}`, bearer, { decision: 'approve', reason: 'x' });
      expect(res.status, what).toBe(401);
      expect(res.headers.get('www-authenticate'), what).toBe('Bearer');
      const body = await json(res);
      expect(body.code, what).toBe(code);
      expect(JSON.stringify(body), what).not.toContain('alice');
    }
    // Neither a JWT nor a named token: the named tokens' 401.
    expect((await json(await call(`${url}/${c.id}`, 'not-a-token'))).code).toBe('UNAUTHORIZED');
    expect(await store.get(c.id)).toMatchObject({ status: 'pending', answeredBy: null });
    expect(await answerEvents(c.id)).toEqual([]);
    expect(await job.isDelayed()).toBe(true);
  });

  it('the JWKS is fetched once and cached, not per request', async () => {
    const before = jwksFetches;
    for (let i = 0; i < 5; i++) expect((await call(url, await token())).status).toBe(200);
    expect(jwksFetches - before).toBeLessThanOrEqual(1);
  });
});

describe('operator JWTs: other key sources and claims', () => {
  async function serve(jwt: Parameters<typeof confirmationHttpHandler>[0]['jwt']) {
    const handle = confirmationHttpHandler({ pool, schema: t.schema, ...(jwt ? { jwt } : {}) });
    const server = createServer((req, res) => void handle(req, res));
    return { server, url: `http://127.0.0.1:${await listen(server)}/confirmations` };
  }

  it('a scope claim with a prefix: only the prefixed entries are namespaces; a PEM public key; JWTs alone', async () => {
    const pem = createPublicKey({ key: publicJwks.keys[1] as JWK & { kty: 'EC' }, format: 'jwk' })
      .export({ format: 'pem', type: 'spki' })
      .toString();
    const { server, url } = await serve({
      issuer: ISSUER,
      audience: AUDIENCE,
      publicKey: pem,
      namespacesClaim: 'scope',
      namespacePrefix: 'bqi:',
    });
    try {
      const a = await store.request(request('acme/payments.charge'));
      const b = await store.request(request('acme/refunds.issue'));
      // "acme/refunds.issue" without the prefix is another application's scope: not a namespace here.
      const scoped = await token({
        key: ec,
        claims: { sub: 'dave', scope: 'openid bqi:acme/payments.* acme/refunds.issue' },
      });
      expect((await call(`${url}/${b.id}`, scoped, { decision: 'approve', reason: 'x' })).status).toBe(403);
      const ok = await call(`${url}/${a.id}`, scoped, { decision: 'approve', reason: 'x' });
      expect(ok.status).toBe(200);
      expect((await store.get(a.id)).answeredBy).toBe('dave');
      // Without the claim: a verified operator of nothing.
      const none = await token({ key: ec, claims: { sub: 'dave', bqi_namespaces: undefined } });
      expect((await call(`${url}/${b.id}`, none)).status).toBe(403);
      // The RSA key is not this configuration's.
      expect((await json(await call(`${url}/${a.id}`, await token({ key: rsa })))).code).toBe('TOKEN_KEY_UNKNOWN');
    } finally {
      await stop(server);
    }
  });

  it('a JWKS that cannot be fetched: 503 TOKEN_KEYS_UNAVAILABLE, nothing answered', async () => {
    const gone = createServer((_req, res) => {
      res.statusCode = 500;
      res.end();
    });
    const port = await listen(gone);
    const { server, url } = await serve({
      issuer: ISSUER,
      audience: AUDIENCE,
      jwksUrl: `http://127.0.0.1:${port}/jwks.json`,
    });
    try {
      const c = await store.request(request('acme/payments.refund'));
      const res = await call(`${url}/${c.id}`, await token(), { decision: 'approve', reason: 'x' });
      expect(res.status).toBe(503);
      expect((await json(res)).code).toBe('TOKEN_KEYS_UNAVAILABLE');
      expect((await store.get(c.id)).status).toBe('pending');
    } finally {
      await stop(server);
      await stop(gone);
    }
  });

  it('configurations that cannot be safe are refused at start: HS algorithms, private keys, plain-HTTP JWKS off loopback, no key source', () => {
    const cases: Record<string, string>[] = [
      { ...jwtEnv(), BQI_OPERATOR_JWT_ALGORITHMS: 'RS256,HS256' },
      { ...jwtEnv(), BQI_OPERATOR_JWKS_URL: 'http://login.example.test/jwks.json' },
      { BQI_OPERATOR_JWT_ISSUER: ISSUER, BQI_OPERATOR_JWT_AUDIENCE: AUDIENCE },
      { ...jwtEnv(), BQI_OPERATOR_JWT_AUDIENCE: '' },
      {
        BQI_OPERATOR_JWT_ISSUER: ISSUER,
        BQI_OPERATOR_JWT_AUDIENCE: AUDIENCE,
        BQI_OPERATOR_JWKS: JSON.stringify({ keys: [{ kty: 'oct', k: 'c2VjcmV0' }] }),
      },
      {
        BQI_OPERATOR_JWT_ISSUER: ISSUER,
        BQI_OPERATOR_JWT_AUDIENCE: AUDIENCE,
        BQI_OPERATOR_JWT_PUBLIC_KEY: '-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----',
      },
      { ...jwtEnv(), BQI_OPERATOR_JWT_ACTOR_CLAIM: 'sub claim' },
    ];
    for (const vars of cases) {
      expect(() => loadConfig({ ...baseEnv(), ...vars }), JSON.stringify(vars)).toThrow(
        expect.objectContaining({ code: 'IDEMPOTENCY_ENV_CONFIG' }),
      );
    }
    expect(loadConfig({ ...baseEnv(), ...jwtEnv() }).operatorJwt).toEqual({
      issuer: [ISSUER],
      audience: [AUDIENCE],
      jwksUrl,
    });
  });
});
