/**
 * What binding a seal to its place costs, per seal and per open, beside the same AES-256-GCM
 * with only the purpose as associated data (the unbound seal), in one process, alternating
 * rounds. Prints a table and one JSON line. `npm run bench:seal`.
 */
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { deserialize, serialize } from 'node:v8';
import { parseKeyringSpec } from '../src/sealing/keyring.js';

const N = Number(process.env.BENCH_SEALS ?? 20_000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 7);
const keyring = parseKeyringSpec(`k1:${randomBytes(32).toString('base64')}`);
const place = {
  purpose: 'result' as const,
  operation: 'payments.charge',
  key: 'acme%2Fpayments.charge:order%3Ao-123456:v1',
};
const value = { chargeId: 'ch_3MmlLrLkdIwHu7ix0snN0B15', amount: 1200, currency: 'eur', status: 'succeeded' };
const key = randomBytes(32);

/** The unbound seal: the purpose alone as associated data. */
function sealUnbound(v: unknown): string {
  const iv = randomBytes(12);
  const c = createCipheriv('aes-256-gcm', key, iv);
  c.setAAD(Buffer.from('bqs1.k1.result'));
  return `bqs1.k1.${Buffer.concat([iv, c.update(serialize(v)), c.final(), c.getAuthTag()]).toString('base64url')}`;
}
function openUnbound(s: string): unknown {
  const raw = Buffer.from(s.slice(8), 'base64url');
  const d = createDecipheriv('aes-256-gcm', key, raw.subarray(0, 12));
  d.setAAD(Buffer.from('bqs1.k1.result'));
  d.setAuthTag(raw.subarray(raw.length - 16));
  return deserialize(Buffer.concat([d.update(raw.subarray(12, raw.length - 16)), d.final()]));
}

function perOp(f: () => unknown): number {
  const t = process.hrtime.bigint();
  for (let i = 0; i < N; i++) f();
  return Number(process.hrtime.bigint() - t) / N / 1000;
}

const bound = keyring.seal(value, place);
const unbound = sealUnbound(value);
const rows: { round: number; sealBound: number; sealUnbound: number; openBound: number; openUnbound: number }[] = [];
for (let r = 0; r < ROUNDS; r++) {
  rows.push({
    round: r + 1,
    sealBound: perOp(() => keyring.seal(value, place)),
    sealUnbound: perOp(() => sealUnbound(value)),
    openBound: perOp(() => keyring.open(bound, place)),
    openUnbound: perOp(() => openUnbound(unbound)),
  });
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;
console.log('round  seal bound  seal unbound  open bound  open unbound   (µs per operation)');
for (const r of rows) {
  console.log(
    `${String(r.round).padStart(5)}  ${r.sealBound.toFixed(2).padStart(10)}  ${r.sealUnbound.toFixed(2).padStart(12)}  ${r.openBound.toFixed(2).padStart(10)}  ${r.openUnbound.toFixed(2).padStart(12)}`,
  );
}
const m = {
  sealBoundUs: median(rows.map((r) => r.sealBound)),
  sealUnboundUs: median(rows.map((r) => r.sealUnbound)),
  openBoundUs: median(rows.map((r) => r.openBound)),
  openUnboundUs: median(rows.map((r) => r.openUnbound)),
  sealDeltaUs: median(rows.map((r) => r.sealBound - r.sealUnbound)),
  openDeltaUs: median(rows.map((r) => r.openBound - r.openUnbound)),
};
console.log(`medians: seal +${m.sealDeltaUs.toFixed(2)} µs for the place, open +${m.openDeltaUs.toFixed(2)} µs`);
console.log(JSON.stringify({ bench: 'seal-place', seals: N, rounds: ROUNDS, ...m }));
