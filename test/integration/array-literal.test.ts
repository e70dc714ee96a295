/**
 * The ledger passes its batched statements' arrays as array literals it makes itself
 * (src/db/array-literal.ts). Postgres must read each one as the very array the driver's own
 * encoding of it gives: every string (quotes, backslashes, braces, commas, blanks, `NULL`, any
 * Unicode), null and number, checked by a round trip through a real server.
 */
import fc from 'fast-check';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { arrayLiteral, encodeArrays } from '../../src/db/array-literal.js';
import { storableText } from '../../src/db/storable.js';
import { TestContext } from '../helpers/context.js';

const t = new TestContext('array_literal');
let pool: pg.Pool;

beforeAll(async () => {
  await t.setup();
  pool = t.pool(2);
});
afterAll(async () => {
  await pool.end();
  await t.teardown();
});

/** Texts Postgres can hold (no NUL, no lone surrogate, as the ledger stores them), array syntax mixed in. */
const tricky = fc.constantFrom(
  '',
  'NULL',
  'null',
  '"',
  '\\',
  '\\"',
  '{',
  '}',
  '{}',
  ',',
  ' ',
  ' a ',
  'a,b',
  '{"x"}',
  "'",
  '\t\n',
);
const text = fc
  .oneof(tricky, fc.string({ unit: 'binary' }), fc.string({ unit: fc.constantFrom('"', '\\', '{', ',', 'a', ' ') }))
  .map(storableText);

/** The array Postgres reads from `value` as a `text[]` parameter. */
async function readText(value: unknown): Promise<(string | null)[]> {
  return (await pool.query('select $1::text[] as a', [value])).rows[0].a;
}

describe('arrayLiteral', () => {
  it('is read as the same text[] as the driver encoding of the array, for any texts and nulls', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(fc.option(text, { nil: null }), { maxLength: 12 }), async (items) => {
        const literal = arrayLiteral(items);
        expect(literal).toBeTypeOf('string');
        const viaLiteral = await readText(literal);
        expect(viaLiteral).toEqual(await readText(items));
        expect(viaLiteral).toEqual(items);
      }),
      { numRuns: 300 },
    );
  });

  it('reads numbers, undefined and empty arrays as the driver does', async () => {
    const ints = [0, -1, 1, 86_400_000, Number.MAX_SAFE_INTEGER, -Number.MAX_SAFE_INTEGER];
    const read = async (v: unknown) => (await pool.query('select $1::int8[] as a', [v])).rows[0].a;
    expect(await read(arrayLiteral(ints))).toEqual(await read(ints));
    expect(await read(arrayLiteral(ints))).toEqual(ints.map(String));
    expect(await readText(arrayLiteral(['a', undefined, 7, null]))).toEqual(['a', null, '7', null]);
    expect(arrayLiteral([])).toBe('{}');
    expect(await readText(arrayLiteral([]))).toEqual([]);
  });

  it('leaves what it does not encode to the driver: buffers, objects, nested arrays', () => {
    expect(arrayLiteral([Buffer.from('x')])).toBeUndefined();
    expect(arrayLiteral(['a', { b: 1 }])).toBeUndefined();
    expect(arrayLiteral([['a']])).toBeUndefined();
    const nested = [['a']];
    const values = encodeArrays(['x', 1, ['a', 'b"'], nested, null]);
    expect(values).toEqual(['x', 1, '{"a","b\\""}', nested, null]);
    expect(values[3]).toBe(nested);
  });
});
