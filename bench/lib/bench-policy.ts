import { defineRedactionPolicy, type RedactionPolicy } from '../../src/redaction/define-policy.js';

/** `bench:audit`'s redaction policy, under `secret`: the same definition in the bench and its writer process. */
export function benchPolicy(secret: Buffer): RedactionPolicy {
  return defineRedactionPolicy({
    version: 'bench-1',
    hmacKeys: [{ id: 'k1', secret: new Uint8Array(secret) }],
    details: { 'tool.search': ['query', 'results', 'user'] },
  });
}
