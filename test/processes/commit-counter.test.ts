import { createServer } from 'node:net';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import * as testing from '../../src/testing/index.js';
import {
  type CommitCountingServer,
  type Effect,
  EffectRequestError,
  type PostEffectResult,
  postEffect,
  type SpawnedCommitCounter,
  startCommitCounter,
} from '../../src/testing/index.js';
import { builtScript } from '../helpers/spawn.js';

type Committed = { id: string; committed: true };

let ds: CommitCountingServer;
beforeEach(async () => {
  ds = await startCommitCounter();
});
afterEach(async () => {
  await ds.close();
});

/** Tracks whether a promise has settled, without waiting for it. */
function track<T>(p: Promise<T>): { p: Promise<T>; settled: () => boolean } {
  let settled = false;
  p.then(
    () => {
      settled = true;
    },
    () => {
      settled = true;
    },
  );
  return { p, settled: () => settled };
}

/** A full HTTP round trip to the stub: anything the stub received before it has been processed up to a wait. */
async function roundTrip(url: string): Promise<{ commits: number; effects: Effect[] }> {
  const res = await fetch(new URL('/effects', url));
  return (await res.json()) as { commits: number; effects: Effect[] };
}

function listenOn(port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => server.close(() => resolve()));
  });
}

describe('commit-counting server', () => {
  it('counts commits and serves them over GET /effects', async () => {
    expect(ds.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    const a = await postEffect<Committed>(ds.url, { ref: 'a', n: 1 });
    const b = await postEffect<Committed>(ds.url, { ref: 'b' }, 'k-b');
    const c = await postEffect<Committed>(`${ds.url}/effects`, { ref: 'a', n: 2 });

    expect([a, b, c]).toEqual([
      { status: 201, body: { id: 'eff_1', committed: true }, replayed: false },
      { status: 201, body: { id: 'eff_2', committed: true }, replayed: false },
      { status: 201, body: { id: 'eff_3', committed: true }, replayed: false },
    ]);
    expect(ds.commits).toBe(3);
    expect(ds.requests).toBe(3);
    expect(ds.effects).toEqual([
      { id: 'eff_1', body: { ref: 'a', n: 1 }, idempotencyKey: null },
      { id: 'eff_2', body: { ref: 'b' }, idempotencyKey: 'k-b' },
      { id: 'eff_3', body: { ref: 'a', n: 2 }, idempotencyKey: null },
    ]);
    expect(ds.commitsFor()).toBe(3);
    expect(ds.commitsFor('k-b')).toBe(1);
    expect(ds.commitsFor({ ref: 'a' })).toBe(2);
    expect(ds.commitsFor({ ref: 'a', n: 2 })).toBe(1);
    expect(ds.commitsFor((e) => e.idempotencyKey === null)).toBe(2);

    const all = await roundTrip(ds.url);
    expect(all.commits).toBe(3);
    expect(all.effects.map((e) => e.id)).toEqual(['eff_1', 'eff_2', 'eff_3']);
    const forKey = (await (await fetch(`${ds.url}/effects?key=k-b`)).json()) as { effects: Effect[] };
    expect(forKey.effects).toEqual([{ id: 'eff_2', body: { ref: 'b' }, idempotencyKey: 'k-b' }]);
    expect(ds.requests).toBe(3); // GETs are not counted
  });

  it('rejects a body that is not JSON, or not canonical JSON (a lone surrogate), without committing', async () => {
    for (const body of ['{nope', '{"ref":"\\ud800"}']) {
      const res = await fetch(`${ds.url}/effects`, { method: 'POST', body, headers: { 'idempotency-key': 'k' } });
      expect(res.status).toBe(400);
      expect(await res.json()).toEqual({ error: 'invalid_json' });
    }
    expect([ds.commits, ds.requests]).toEqual([0, 2]);
  });

  it('replays the original response for a repeated idempotency key, with one commit', async () => {
    const first = await postEffect<Committed>(ds.url, { ref: 'x', amount: 5 }, 'key-1');
    // same body, keys in another order: same fingerprint
    const again = await postEffect<Committed>(ds.url, { amount: 5, ref: 'x' }, 'key-1');

    expect(first).toEqual({ status: 201, body: { id: 'eff_1', committed: true }, replayed: false });
    expect(again).toEqual({ status: 201, body: { id: 'eff_1', committed: true }, replayed: true });
    expect(ds.commits).toBe(1);
    expect(ds.commitsFor('key-1')).toBe(1);
    expect(ds.requests).toBe(2);

    const other = await postEffect<Committed>(ds.url, { ref: 'x', amount: 5 }, 'key-2');
    expect(other.body.id).toBe('eff_2');
    expect(ds.commits).toBe(2);
  });

  it('commits every repeat when idempotency keys are not honoured', async () => {
    const naive = await startCommitCounter({ honourIdempotencyKey: false });
    try {
      await postEffect(naive.url, { ref: 'x' }, 'key-1');
      const again = await postEffect<Committed>(naive.url, { ref: 'x' }, 'key-1');
      expect(again).toEqual({ status: 201, body: { id: 'eff_2', committed: true }, replayed: false });
      expect(naive.commitsFor('key-1')).toBe(2);
    } finally {
      await naive.close();
    }
  });

  it('makes a concurrent request with the same key wait for the first and replay it (one commit)', async () => {
    const gate = ds.holdNext();
    const first = track(postEffect<Committed>(ds.url, { ref: 'c' }, 'key-c'));
    const held = await gate.reached;
    expect(held).toEqual({ id: 'eff_1', body: { ref: 'c' }, idempotencyKey: 'key-c' });

    const second = track(postEffect<Committed>(ds.url, { ref: 'c' }, 'key-c'));
    await vi.waitFor(() => expect(ds.requests).toBe(2));
    await roundTrip(ds.url);
    expect(first.settled()).toBe(false);
    expect(second.settled()).toBe(false);
    expect(ds.commits).toBe(1);

    gate.release();
    const [r1, r2] = await Promise.all([first.p, second.p]);
    expect(r1).toEqual({ status: 201, body: { id: 'eff_1', committed: true }, replayed: false });
    expect(r2).toEqual({ status: 201, body: { id: 'eff_1', committed: true }, replayed: true });
    expect(ds.commits).toBe(1);
  });

  it('commits once for a burst of same-key requests while the first is delayed', async () => {
    ds.delayMs = 100;
    const results = await Promise.all(
      Array.from({ length: 5 }, () => postEffect<Committed>(ds.url, { ref: 'burst' }, 'key-burst')),
    );
    expect(ds.commits).toBe(1);
    expect(ds.requests).toBe(5);
    expect(new Set(results.map((r) => r.body.id))).toEqual(new Set(['eff_1']));
    expect(results.map((r) => r.status)).toEqual([201, 201, 201, 201, 201]);
    expect(results.filter((r) => !r.replayed)).toHaveLength(1);
  });

  it('answers 422 for the same key with a different body, without committing', async () => {
    await postEffect(ds.url, { ref: 'a', amount: 1 }, 'key-r');
    const reused = await postEffect(ds.url, { ref: 'a', amount: 2 }, 'key-r');
    expect(reused).toEqual({ status: 422, body: { error: 'idempotency_key_reused' }, replayed: false });
    expect(ds.commits).toBe(1);
    // the original is still replayable
    const again = await postEffect(ds.url, { ref: 'a', amount: 1 }, 'key-r');
    expect(again.replayed).toBe(true);
    expect(ds.commits).toBe(1);
  });

  it('commit-then-drop: the client sees a network error, one commit, and a retry replays the original', async () => {
    ds.failNext('commit-then-drop');
    const lost = postEffect(ds.url, { ref: 'd' }, 'key-d');
    await expect(lost).rejects.toBeInstanceOf(EffectRequestError);
    await expect(lost).rejects.toMatchObject({ code: expect.any(String) });
    expect(ds.commits).toBe(1);

    const retry = await postEffect<Committed>(ds.url, { ref: 'd' }, 'key-d');
    expect(retry).toEqual({ status: 201, body: { id: 'eff_1', committed: true }, replayed: true });
    expect(ds.commits).toBe(1);
    expect(ds.requests).toBe(2);
  });

  it('commit-then-drop without a key: the retry commits a duplicate', async () => {
    ds.failNext('commit-then-drop');
    await expect(postEffect(ds.url, { ref: 'dup' })).rejects.toThrow(EffectRequestError);
    await postEffect(ds.url, { ref: 'dup' });
    expect(ds.commitsFor({ ref: 'dup' })).toBe(2);
  });

  it('drop-before-commit: the client sees a network error and nothing is committed', async () => {
    ds.failNext('drop-before-commit');
    await expect(postEffect(ds.url, { ref: 'e' }, 'key-e')).rejects.toThrow(EffectRequestError);
    expect(ds.commits).toBe(0);
    expect(ds.requests).toBe(1);

    const retry = await postEffect<Committed>(ds.url, { ref: 'e' }, 'key-e');
    expect(retry).toEqual({ status: 201, body: { id: 'eff_1', committed: true }, replayed: false });
    expect(ds.commits).toBe(1);
  });

  it('error-500: responds 500 without committing, for `count` requests', async () => {
    ds.failNext('error-500', 2);
    const a = await postEffect(ds.url, { ref: 'f' }, 'key-f');
    const b = await postEffect(ds.url, { ref: 'f' }, 'key-f');
    expect([a.status, b.status]).toEqual([500, 500]);
    expect(a.body).toEqual({ error: 'injected_failure' });
    expect(ds.commits).toBe(0);

    const c = await postEffect<Committed>(ds.url, { ref: 'f' }, 'key-f');
    expect(c).toEqual({ status: 201, body: { id: 'eff_1', committed: true }, replayed: false });
    expect(ds.commits).toBe(1);
  });

  it('queues faults in order', async () => {
    ds.failNext('error-500');
    ds.failNext('drop-before-commit');
    expect((await postEffect(ds.url, { n: 1 })).status).toBe(500);
    await expect(postEffect(ds.url, { n: 2 })).rejects.toThrow(EffectRequestError);
    expect((await postEffect(ds.url, { n: 3 })).status).toBe(201);
    expect(ds.effects.map((e) => e.body)).toEqual([{ n: 3 }]);
  });

  it('delayMs: commits before the delayed response', async () => {
    ds.delayMs = 300;
    const started = performance.now();
    const pending = track(postEffect(ds.url, { ref: 'slow' }));
    await vi.waitFor(() => expect(ds.commits).toBe(1), { interval: 5 });
    expect(pending.settled()).toBe(false);
    expect((await pending.p).status).toBe(201);
    expect(performance.now() - started).toBeGreaterThanOrEqual(290);
  });

  it('holdNext keeps a committed request pending until released, and holds only one request', async () => {
    const gate = ds.holdNext();
    expect(gate.released).toBe(false);
    const held = track(postEffect<Committed>(ds.url, { ref: 'h' }, 'key-h'));
    const effect = await gate.reached;
    expect(effect.id).toBe('eff_1');
    expect(ds.commits).toBe(1);

    // an unrelated request is not held and completes while the first is still pending
    const other = await postEffect<Committed>(ds.url, { ref: 'other' });
    expect(other.body.id).toBe('eff_2');
    await roundTrip(ds.url);
    expect(held.settled()).toBe(false);

    gate.release();
    expect(gate.released).toBe(true);
    expect(await held.p).toEqual({ status: 201, body: { id: 'eff_1', committed: true }, replayed: false });
  });

  it('holdNext combined with commit-then-drop: commit, hold, then lose the response', async () => {
    const gate = ds.holdNext();
    ds.failNext('commit-then-drop');
    const held = track(postEffect(ds.url, { ref: 'hd' }, 'key-hd'));
    await gate.reached;
    expect(ds.commits).toBe(1);
    await roundTrip(ds.url);
    expect(held.settled()).toBe(false);
    gate.release();
    await expect(held.p).rejects.toThrow(EffectRequestError);
    expect((await postEffect(ds.url, { ref: 'hd' }, 'key-hd')).replayed).toBe(true);
    expect(ds.commits).toBe(1);
  });

  it('the hold option (a function) is awaited for every commit', async () => {
    const seen: string[] = [];
    let open!: () => void;
    const opened = new Promise<void>((r) => {
      open = r;
    });
    ds.hold = (effect) => {
      seen.push(effect.id);
      return opened;
    };
    const a = track(postEffect(ds.url, { n: 1 }));
    const b = track(postEffect(ds.url, { n: 2 }));
    await vi.waitFor(() => expect(seen).toHaveLength(2));
    expect(a.settled() || b.settled()).toBe(false);
    open();
    const results: PostEffectResult[] = await Promise.all([a.p, b.p]);
    expect(results.map((r) => r.status)).toEqual([201, 201]);
    expect(ds.commits).toBe(2);
  });

  it('30 requests held at once: each answered, and no listener warning from the server', async () => {
    const warnings: Error[] = [];
    const onWarning = (w: Error) => warnings.push(w);
    process.on('warning', onWarning);
    try {
      let open!: () => void;
      const opened = new Promise<void>((r) => {
        open = r;
      });
      let held = 0;
      ds.hold = () => {
        held++;
        return opened;
      };
      const posts = Array.from({ length: 30 }, (_, n) => postEffect(ds.url, { n }));
      await vi.waitFor(() => expect(held).toBe(30));
      open();
      expect((await Promise.all(posts)).map((r) => r.status)).toEqual(Array(30).fill(201));
      // A process warning is emitted on a later turn of the event loop.
      await new Promise((r) => setImmediate(r));
      expect(warnings.filter((w) => w.name === 'MaxListenersExceededWarning')).toEqual([]);
      expect(ds.commits).toBe(30);
    } finally {
      process.off('warning', onWarning);
    }
  });

  it('close() resolves with a request still held, and releases the port', async () => {
    const { port, url } = ds;
    const gate = ds.holdNext();
    const held = postEffect(url, { ref: 'z' });
    await gate.reached;

    await expect(ds.close()).resolves.toBeUndefined();
    await expect(ds.close()).resolves.toBeUndefined(); // idempotent
    await expect(held).rejects.toThrow(EffectRequestError);
    await expect(postEffect(url, { ref: 'after' })).rejects.toMatchObject({ code: 'ECONNREFUSED' });
    await expect(listenOn(port)).resolves.toBeUndefined();
  });

  it('reset() forgets effects, counters, stored responses and faults', async () => {
    await postEffect(ds.url, { ref: 'r' }, 'key-r');
    ds.failNext('error-500');
    ds.reset();
    expect([ds.commits, ds.requests]).toEqual([0, 0]);
    const again = await postEffect<Committed>(ds.url, { ref: 'r' }, 'key-r');
    expect(again).toEqual({ status: 201, body: { id: 'eff_1', committed: true }, replayed: false });
  });
});

describe('the names of earlier releases', () => {
  it('are gone: one name per class and function', () => {
    for (const alias of ['Downstream', 'startDownstream', 'DownstreamRequestError', 'spawnDownstream']) {
      expect(testing).not.toHaveProperty(alias);
    }
  });
});

describe('commit-counting server in a child process', () => {
  let child: SpawnedCommitCounter | undefined;
  afterEach(async () => {
    await child?.stop();
    child = undefined;
  });

  it('prints its URL, commits, takes faults over POST /control and exits on stop()', async () => {
    // The built module, as the package ships it: its child runs cli.js without tsx.
    const spawnModule = builtScript('src/testing/spawn.ts') ?? '../../src/testing/spawn.js';
    const { spawnCommitCounter } = (await import(spawnModule)) as typeof import('../../src/testing/spawn.js');
    child = await spawnCommitCounter();
    expect(child.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect((await postEffect(child.url, { ref: 'p' }, 'key-p')).status).toBe(201);
    expect((await postEffect(child.url, { ref: 'p' }, 'key-p')).replayed).toBe(true);

    const control = await fetch(`${child.url}/control`, {
      method: 'POST',
      body: JSON.stringify({ failNext: { mode: 'error-500' } }),
    });
    expect(control.status).toBe(200);
    expect((await postEffect(child.url, { ref: 'q' })).status).toBe(500);

    const { commits, effects } = await roundTrip(child.url);
    expect(commits).toBe(1);
    expect(effects).toEqual([{ id: 'eff_1', body: { ref: 'p' }, idempotencyKey: 'key-p' }]);

    const port = Number(new URL(child.url).port);
    await child.stop();
    expect(child.child.exitCode).toBe(0);
    await expect(listenOn(port)).resolves.toBeUndefined();
  });
});
