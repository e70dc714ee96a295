import { describe, expect, it } from 'vitest';
import { isJobId, isLibraryKey } from '../../src/audit/identifier-grammar.js';
import { boundedKey } from '../../src/keys/idempotency-key.js';
import { jobIdOfKey } from '../../src/keys/job-id.js';

const KEYS = [
  'acme%2Fsearch:q%3A1:v1',
  'orders:order-2026-000123:v2',
  '1996-12-09T00:25:00Z',
  'acme:jane%40example.com:v1',
  'acme:sk_live_4eC39HqLyjWDarjtT1zdp7dc:v1',
  boundedKey({ namespace: 'acme/search', resourceKey: 'order-'.repeat(60), version: 'v1' }),
];

describe('library keys and job ids asked again', () => {
  it('gives every key the same verdict the second time, in either form', () => {
    const first = KEYS.map((k) => [isLibraryKey(k, false), isLibraryKey(k, true)]);
    const again = KEYS.map((k) => [isLibraryKey(k, false), isLibraryKey(k, true)]);
    expect(again).toEqual(first);
    expect(first.map(([canonical]) => canonical)).toEqual([true, true, false, false, false, false]);
    expect(first[5]).toEqual([false, true]);
  });

  it('passes a job id for its own key only, also once the pair has passed', () => {
    const key = 'acme%2Fsearch:q%3A2:v1';
    const other = 'acme%2Fsearch:q%3A3:v1';
    const id = jobIdOfKey(key);
    expect(isJobId(id, key)).toBe(true);
    expect(isJobId(id, key)).toBe(true);
    expect(isJobId(id, other)).toBe(false);
    expect(isJobId(id, undefined)).toBe(false);
    expect(isJobId(jobIdOfKey('acme:jane%40example.com:v1'), 'acme:jane%40example.com:v1')).toBe(false);
  });
});
