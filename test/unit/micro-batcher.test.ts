import { describe, expect, it } from 'vitest';
import { MicroBatcher } from '../../src/ledger/micro-batcher.js';

/** A batch function whose batches return only when released, recording each batch's keys. */
function gated() {
  const batches: string[][] = [];
  const gates: (() => void)[] = [];
  const exec = (reqs: { key: string }[]) => {
    batches.push(reqs.map((r) => r.key));
    return new Promise<Map<string, string>>((resolve) => {
      gates.push(() => resolve(new Map(reqs.map((r) => [r.key, `done ${r.key}`]))));
    });
  };
  return { batches, gates, exec };
}

const turn = () => new Promise((r) => setImmediate(r));
/** A few turns of the event loop: a returned batch's callbacks have run and the next batch has started. */
const settle = async () => {
  for (let i = 0; i < 3; i++) await turn();
};

describe('MicroBatcher', () => {
  it('requests arriving while a batch is in flight wait for it and go together in the next one', async () => {
    const g = gated();
    const batcher = new MicroBatcher(g.exec, 200, 4, 10_000);
    const first = batcher.submit({ key: 'a' });
    await turn();
    expect(g.batches).toEqual([['a']]);
    const later = ['b', 'c', 'd'].map(async (key) => {
      const answer = batcher.submit({ key });
      await turn();
      return answer;
    });
    await turn();
    await turn();
    // Still one batch: b, c and d wait for a's to return instead of starting three small ones.
    expect(g.batches).toEqual([['a']]);
    g.gates[0]!();
    expect(await first).toBe('done a');
    await settle();
    expect(g.batches).toEqual([['a'], ['b', 'c', 'd']]);
    g.gates[1]!();
    expect(await Promise.all(later)).toEqual(['done b', 'done c', 'done d']);
  });

  it('a batch in flight for overlapAfterMs with none returning lets the next start beside it', async () => {
    const g = gated();
    const batcher = new MicroBatcher(g.exec, 200, 2, 30);
    void batcher.submit({ key: 'stuck' });
    await turn();
    const next = batcher.submit({ key: 'x' });
    await turn();
    expect(g.batches).toEqual([['stuck']]);
    await new Promise((r) => setTimeout(r, 60));
    expect(g.batches).toEqual([['stuck'], ['x']]);
    g.gates[1]!();
    expect(await next).toBe('done x');
    // maxInFlight bounds the overlap: with two in flight, the next waits however long they take.
    const third = batcher.submit({ key: 'y' });
    await turn();
    expect(g.batches.length).toBe(2);
    await new Promise((r) => setTimeout(r, 60));
    expect(g.batches).toEqual([['stuck'], ['x'], ['y']]);
    const fourth = batcher.submit({ key: 'z' });
    await new Promise((r) => setTimeout(r, 60));
    expect(g.batches.length).toBe(3);
    // The stuck batch returns: y's is still in flight, so z waits for it, or for the overlap.
    g.gates[0]!();
    await settle();
    expect(g.batches.length).toBe(3);
    await new Promise((r) => setTimeout(r, 60));
    expect(g.batches.at(-1)).toEqual(['z']);
    g.gates[2]!();
    g.gates[3]!();
    expect(await Promise.all([third, fourth])).toEqual(['done y', 'done z']);
  });

  it('a repeated key waits for the next batch; a full batch leaves the rest to one started at once', async () => {
    const g = gated();
    const batcher = new MicroBatcher(g.exec, 2, 4, 10_000);
    for (const key of ['k', 'k', 'm', 'n']) void batcher.submit({ key });
    await turn();
    expect(g.batches).toEqual([
      ['k', 'm'],
      ['k', 'n'],
    ]);
  });
});
