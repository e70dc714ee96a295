import { expect, it } from 'vitest';
import { defineRedactionPolicy, withValueScanner } from '../../src/redaction/define-policy.js';
import { engineOf } from '../../src/redaction/policy-engine.js';
import type { RedactionPolicyInput } from '../../src/redaction/policy-schema.js';
import { DEFAULT_VALUE_SCANNER } from '../../src/scanners/value-scanner.js';

const base: RedactionPolicyInput = {
  version: 'fp-1',
  hmacKeys: [{ id: 'k1', secret: 'a-policy-fingerprint-key-of-32-bytes-or-more' }],
  identifiers: { taskId: [/^task-[a-z]+$/] },
};
const fp = (input: RedactionPolicyInput) => engineOf(defineRedactionPolicy(input)).fingerprint;

it('is the same for one definition compiled twice, and changes with any part of what the policy does', () => {
  const f = fp(base);
  expect(f).toMatch(/^[A-Za-z0-9_-]{43}$/);
  expect(fp({ ...base })).toBe(f);
  const changes: RedactionPolicyInput[] = [
    { ...base, version: 'fp-2' },
    { ...base, identifiers: { taskId: [/^task-[a-z0-9]+$/] } },
    { ...base, identifiers: { taskId: [/^task-[a-z]+$/i] } },
    { ...base, identifiers: { taskId: [(v: string) => v.startsWith('task-')] } },
    { ...base, identifiers: { taskId: [(v: string) => v.startsWith('job-')] } },
    { ...base, details: { 'tool.search': ['query'] } },
    { ...base, fields: { identifier: ['tenantId'] } },
    { ...base, disabledScanners: ['phone'] },
    { ...base, limits: { maxDepth: 31 } },
    { ...base, hmacKeys: [{ id: 'k2', secret: 'a-policy-fingerprint-key-of-32-bytes-or-more' }] },
  ];
  const seen = new Set([f]);
  for (const c of changes) {
    const g = fp(c);
    expect(g).toBeDefined();
    expect(seen.has(g as string)).toBe(false);
    seen.add(g as string);
  }
});

it('leaves the secret out (a tag is keyed by it instead), and is undefined once a value scanner is replaced', () => {
  expect(fp({ ...base, hmacKeys: [{ id: 'k1', secret: 'another-policy-fingerprint-key-of-32-bytes' }] })).toBe(
    fp(base),
  );
  expect(engineOf(withValueScanner(defineRedactionPolicy(base), DEFAULT_VALUE_SCANNER)).fingerprint).toBeUndefined();
});
