import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { IdempotencyConfigError } from '../../src/errors/errors.js';
import { defineOperation } from '../../src/operation/define-operation.js';

/**
 * The fields an operation declares sealed (`sensitiveInput`) or public (`publicResult`) are fields
 * of its schemas. A name that is not one (a typo, a nested path) was ignored: nothing was sealed,
 * nothing said, and the value travelled in clear in Redis.
 */
const input = z.object({ account: z.string(), card: z.object({ number: z.string(), cvc: z.string() }) });
const result = z.object({ chargeId: z.string(), receipt: z.string() });
const base = {
  name: 'pay',
  namespace: 'acme/pay',
  version: 'v1',
  input,
  effect: (i: z.output<typeof input>) => i,
  resourceKey: (i: z.output<typeof input>) => `account:${i.account}`,
  retention: '1h' as const,
  lease: '5s' as const,
  downstream: 'idempotent' as const,
};

function refusal(fn: () => unknown): IdempotencyConfigError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(IdempotencyConfigError);
    return err as IdempotencyConfigError;
  }
  throw new Error('the declaration was accepted');
}

describe('declared fields are checked when the operation is defined', () => {
  it.each([
    ['a nested path', ['card.number'], /nested paths are not supported/],
    ['a typo', ['crad'], /'crad', not a top-level field of the input schema \(its fields: account, card\)/],
    ['one good and one missing', ['card', 'cvv'], /'cvv'/],
    ['an index path', ['card[0]'], /nested paths/],
  ])('sensitiveInput with %s is refused', (_what, names, message) => {
    const err = refusal(() => defineOperation({ ...base, sensitiveInput: names }));
    expect(err.code).toBe('IDEMPOTENCY_CONFIG');
    expect(err.details).toMatchObject({ option: 'sensitiveInput' });
    expect(err.message).toMatch(message);
  });

  it('publicResult naming no field of the result schema is refused', () => {
    const err = refusal(() =>
      defineOperation({ ...base, result, publicResult: ['chargeId', 'chargeID' as 'chargeId'] }),
    );
    expect(err.details).toMatchObject({ option: 'publicResult' });
    expect(err.message).toMatch(/'chargeID', not a top-level field of the result schema/);
  });

  it('a schema that is not an object cannot have its names checked: refused', () => {
    const union = z.union([z.object({ a: z.string() }), z.object({ b: z.string() })]);
    const err = refusal(() =>
      defineOperation({ ...base, input: union, effect: (i) => i, resourceKey: () => 'x', sensitiveInput: ['a'] }),
    );
    expect(err.message).toMatch(/needs an object input schema/);
  });

  it('top-level fields are accepted, also through transform, optional and default wrappers', () => {
    expect(defineOperation({ ...base, sensitiveInput: ['card'] }).sensitiveInput).toEqual(['card']);
    const piped = input.transform((i) => i);
    expect(
      defineOperation({ ...base, input: piped, effect: (i) => i, resourceKey: () => 'x', sensitiveInput: ['card'] })
        .sensitiveInput,
    ).toEqual(['card']);
    const wrapped = input.optional().default({ account: 'a', card: { number: '1', cvc: '2' } });
    expect(
      defineOperation({
        ...base,
        input: wrapped,
        effect: (i) => i,
        resourceKey: () => 'x',
        sensitiveInput: ['account'],
      }).sensitiveInput,
    ).toEqual(['account']);
    expect(defineOperation({ ...base, result, publicResult: ['chargeId'] }).publicResult).toEqual(['chargeId']);
  });
});
