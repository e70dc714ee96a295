/**
 * The payments API the README's tour calls (`https://payments.example/charges`), served on a
 * local port for the test that runs the tour: `fetch` calls to that origin are sent there, every
 * other call goes out as it is. Like a real payments API it commits one charge per
 * `Idempotency-Key` and answers a repeat with the first charge.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

export type Charge = { id: string; receipt: string; idempotencyKey: string };

export type PaymentsApi = {
  /** The charges committed, in order. */
  readonly charges: Charge[];
  /** Requests received, repeats included. */
  readonly requests: () => number;
  close(): Promise<void>;
};

export async function servePaymentsExample(origin = 'https://payments.example'): Promise<PaymentsApi> {
  const charges: Charge[] = [];
  const byKey = new Map<string, Charge>();
  let requests = 0;
  const server = createServer((req, res) => {
    requests++;
    req.resume().on('end', () => {
      const key = String(req.headers['idempotency-key'] ?? '');
      if (req.method !== 'POST' || req.url !== '/charges' || !key) {
        res.writeHead(400).end();
        return;
      }
      let charge = byKey.get(key);
      if (!charge) {
        charge = {
          id: `ch_${charges.length + 1}`,
          receipt: `rcpt_${Math.random().toString(36).slice(2)}`,
          idempotencyKey: key,
        };
        charges.push(charge);
        byKey.set(key, charge);
      }
      res
        .writeHead(200, { 'content-type': 'application/json' })
        .end(JSON.stringify({ id: charge.id, receipt: charge.receipt }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const local = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const realFetch = globalThis.fetch;
  globalThis.fetch = (input, init) => {
    const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
    return url.startsWith(`${origin}/`) ? realFetch(local + url.slice(origin.length), init) : realFetch(input, init);
  };
  return {
    charges,
    requests: () => requests,
    close: async () => {
      globalThis.fetch = realFetch;
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
