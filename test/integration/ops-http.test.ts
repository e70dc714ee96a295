/**
 * The operations process's HTTP server: the route table (mounting a route, 404, 405 with Allow,
 * HEAD, bodies and their limit, errors) and the probes against services that answer and that do not.
 */
import { networkInterfaces } from 'node:os';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/env.js';
import { healthRoutes } from '../../src/ops/health-routes.js';
import { HttpError, OpsHttpServer, readBody } from '../../src/ops/http-server.js';
import { TestContext } from '../helpers/context.js';

const t = new TestContext('ops_http');

beforeAll(async () => {
  await t.setup();
});
afterAll(async () => {
  await t.teardown();
});

async function request(port: number, path: string, init: RequestInit = {}) {
  const res = await fetch(`http://127.0.0.1:${port}${path}`, init);
  const text = await res.text();
  const json = res.headers.get('content-type')?.includes('json') && text ? (JSON.parse(text) as unknown) : undefined;
  return { status: res.status, headers: res.headers, text, json };
}

describe('OpsHttpServer', () => {
  it('answers from its route table; routes mounted after listen() are served too', async () => {
    const seen: string[] = [];
    const server = new OpsHttpServer({
      routes: [{ method: 'GET', path: '/a', handle: () => ({ status: 200, body: { a: 1 } }) }],
    });
    const { port } = await server.listen(0, '127.0.0.1');
    try {
      server.route({
        method: 'POST',
        path: '/echo',
        handle: async (req) => {
          if (req.headers.authorization !== 'Bearer right') throw new HttpError(401, 'unauthorized');
          const body = (await readBody(req, 16)).toString('utf8');
          seen.push(body);
          return { status: 202, body: { got: body } };
        },
      });
      server.route({
        method: 'GET',
        path: '/boom',
        handle: () => {
          throw Object.assign(new Error('secret detail sk_live_abc'), { code: 'EBOOM' });
        },
      });
      expect(() => server.route({ method: 'GET', path: '/a', handle: () => ({ status: 200 }) })).toThrow(
        /already mounted/,
      );

      expect(await request(port, '/a')).toMatchObject({ status: 200, json: { a: 1 } });
      expect(await request(port, '/a?x=1')).toMatchObject({ status: 200 });
      const head = await request(port, '/a', { method: 'HEAD' });
      expect(head).toMatchObject({ status: 200, text: '' });
      expect(await request(port, '/missing')).toMatchObject({ status: 404, json: { error: 'not found' } });
      const wrong = await request(port, '/a', { method: 'DELETE' });
      expect(wrong.status).toBe(405);
      expect(wrong.headers.get('allow')).toBe('GET, HEAD');

      const post = (body: string, token = 'right') =>
        request(port, '/echo', { method: 'POST', body, headers: { authorization: `Bearer ${token}` } });
      expect(await post('hello')).toMatchObject({ status: 202, json: { got: 'hello' } });
      expect(await post('hello', 'wrong')).toMatchObject({ status: 401, json: { error: 'unauthorized' } });
      expect(await post('x'.repeat(17))).toMatchObject({ status: 413 });
      expect(seen).toEqual(['hello']);

      const boom = await request(port, '/boom');
      expect(boom).toMatchObject({ status: 500, json: { error: 'internal error' } });
      expect(boom.text).not.toContain('sk_live');
    } finally {
      await server.close();
    }
    await expect(fetch(`http://127.0.0.1:${port}/a`)).rejects.toThrow();
  });

  it('hands a mounted prefix to its handler (any method); exact routes win; a handler that throws gets a 500', async () => {
    const server = new OpsHttpServer({
      routes: [{ method: 'GET', path: '/things/special', handle: () => ({ status: 200, body: { route: true } }) }],
    });
    const seen: string[] = [];
    server.mount('/things/', async (req, res) => {
      seen.push(`${req.method} ${req.url}`);
      if (req.url === '/things/bad') throw new Error('boom');
      res.writeHead(201, { 'content-type': 'text/plain' }).end('mounted');
    });
    expect(() => server.mount('/things', async () => {})).toThrow(/already mounted/);
    const { port } = await server.listen(0, '127.0.0.1');
    try {
      expect(await request(port, '/things')).toMatchObject({ status: 201, text: 'mounted' });
      expect(await request(port, '/things/cf-1', { method: 'POST', body: '{}' })).toMatchObject({ status: 201 });
      expect(await request(port, '/things/special')).toMatchObject({ status: 200, json: { route: true } });
      expect(await request(port, '/thingsmore')).toMatchObject({ status: 404 });
      expect(await request(port, '/things/bad')).toMatchObject({ status: 500, json: { error: 'internal error' } });
      expect(seen).toEqual(['GET /things', 'POST /things/cf-1', 'GET /things/bad']);
    } finally {
      await server.close();
    }
  });

  it('listens on loopback only unless told otherwise (BQI_HTTP_HOST): not reachable on another interface', async () => {
    expect(loadConfig({ DATABASE_URL: t.databaseUrl, REDIS_URL: t.redisUrl }).httpHost).toBe('127.0.0.1');
    const server = new OpsHttpServer({
      routes: [{ method: 'GET', path: '/ping', handle: () => ({ status: 200, body: 'pong' }) }],
    });
    const { address, port } = await server.listen(0);
    try {
      expect(address).toBe('127.0.0.1');
      expect((await request(port, '/ping')).text).toBe('pong');
      const external = Object.values(networkInterfaces())
        .flat()
        .find((i) => i !== undefined && i.family === 'IPv4' && !i.internal);
      if (external) {
        await expect(fetch(`http://${external.address}:${port}/ping`)).rejects.toThrow();
      }
    } finally {
      await server.close();
    }
  });

  it('refuses a port that is taken', async () => {
    const first = new OpsHttpServer();
    const { port } = await first.listen(0, '127.0.0.1');
    try {
      await expect(new OpsHttpServer().listen(port, '127.0.0.1')).rejects.toMatchObject({ code: 'EADDRINUSE' });
    } finally {
      await first.close();
    }
  });
});

describe('health routes', () => {
  it('/readyz is 200 with both services answering, 503 naming each failure by code; /healthz names stopped workers', async () => {
    const live = t.pool(1);
    const dead = new pg.Pool({ connectionString: 'postgres://postgres@127.0.0.1:1/none', max: 1 });
    let running = true;
    let stopping = false;
    const server = new OpsHttpServer();
    for (const r of healthRoutes({
      pool: live,
      pingRedis: async () => 'ok',
      workers: { 'audit writer': { isRunning: () => running } },
      stopping: () => stopping,
    })) {
      server.route(r);
    }
    const failing = new OpsHttpServer({
      routes: healthRoutes({
        pool: dead,
        pingRedis: () => Promise.reject(Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' })),
        workers: {},
        stopping: () => false,
        readyTimeoutMs: 1_000,
      }),
    });
    const { port } = await server.listen(0, '127.0.0.1');
    const { port: failingPort } = await failing.listen(0, '127.0.0.1');
    try {
      expect(await request(port, '/readyz')).toMatchObject({
        status: 200,
        json: { status: 'ready', postgres: 'ok', redis: 'ok' },
      });
      expect(await request(failingPort, '/readyz')).toMatchObject({
        status: 503,
        json: { status: 'not ready', postgres: 'ECONNREFUSED', redis: 'ECONNREFUSED' },
      });
      expect(await request(port, '/healthz')).toMatchObject({ status: 200, json: { status: 'ok' } });
      running = false;
      expect(await request(port, '/healthz')).toMatchObject({
        status: 503,
        json: { status: 'unhealthy', stopped: ['audit writer'] },
      });
      stopping = true;
      expect(await request(port, '/healthz')).toMatchObject({ status: 503, json: { status: 'stopping' } });
      expect(await request(port, '/readyz')).toMatchObject({ status: 503, json: { status: 'stopping' } });
    } finally {
      await Promise.all([server.close(), failing.close()]);
      await Promise.all([live.end(), dead.end()]);
    }
  });
});

describe('/readyz under many probes', () => {
  it('one check a second answers every probe (in flight too), unauthenticated, and tells states and codes only', async () => {
    const live = t.pool(2);
    let pgQueries = 0;
    let redisReads = 0;
    const counted = new Proxy(live, {
      get(target, prop, receiver) {
        if (prop === 'query') {
          return (...args: unknown[]) => {
            pgQueries++;
            return (target.query as (...a: unknown[]) => unknown)(...args);
          };
        }
        return Reflect.get(target, prop, receiver);
      },
    });
    const server = new OpsHttpServer({
      routes: healthRoutes({
        pool: counted,
        pingRedis: async () => {
          redisReads++;
          return 0;
        },
        workers: {},
        stopping: () => false,
        schedules: async () => ({ sweeper: true }),
      }),
    });
    const { port } = await server.listen(0, '127.0.0.1');
    try {
      const started = performance.now();
      // 50 probes at once, then more for a little over two seconds.
      const burst = await Promise.all(Array.from({ length: 50 }, () => request(port, '/readyz')));
      for (const r of burst)
        expect(r).toMatchObject({ status: 200, json: { status: 'ready', postgres: 'ok', redis: 'ok' } });
      let probes = burst.length;
      // A little over two seconds, and more than 60 probes however slow the machine is.
      while (performance.now() - started < 2_200 || probes <= 60) {
        await Promise.all(Array.from({ length: 10 }, () => request(port, '/readyz')));
        probes += 10;
      }
      const seconds = Math.ceil((performance.now() - started) / 1_000);
      expect(probes).toBeGreaterThan(60);
      // At most one check per started second (and the first).
      expect(pgQueries).toBeGreaterThanOrEqual(1);
      expect(pgQueries).toBeLessThanOrEqual(seconds + 1);
      expect(redisReads).toBe(pgQueries);
      const one = await request(port, '/readyz');
      expect(Object.keys(one.json as object).sort()).toEqual(['postgres', 'redis', 'schedules', 'status']);
      expect(one.text).not.toMatch(/postgres:\/\/|127\.0\.0\.1|password|select/i);
    } finally {
      await server.close();
      await live.end();
    }
  });
});
