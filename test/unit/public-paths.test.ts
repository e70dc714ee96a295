/**
 * What a public message may say of where a value was refused: the keys its schema declares, never a
 * key the value brought. A record's keys, an unknown key, anything under them are data (a secret
 * used as a key, a card number, a name): shown as `…` whatever they look like — a random token
 * without a single digit passes any grammar of names.
 */
import { randomInt } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { isCleanName } from '../../src/errors/clean-name.js';
import { InvalidInputError, NotMigratedError } from '../../src/errors/errors.js';
import { testOperation } from '../fixtures/operations.js';

const pick = (alphabet: string, n: number) =>
  Array.from({ length: n }, () => alphabet[randomInt(alphabet.length)]).join('');
const LETTERS = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

function refusal(run: () => unknown): InvalidInputError {
  try {
    run();
  } catch (err) {
    if (err instanceof InvalidInputError) return err;
    throw err;
  }
  throw new Error('not refused');
}

describe('paths in public messages', () => {
  const op = testOperation({
    name: 'paths.run',
    input: z.object({
      address: z.object({ city: z.string() }),
      items: z.array(z.object({ amount: z.number() })).default([]),
      meta: z.object({ tag: z.string() }).optional(),
      blob: z.record(z.string(), z.literal(0)).optional(),
      extra: z
        .object({})
        .catchall(z.object({ n: z.number() }))
        .optional(),
      either: z
        .union([z.object({ kind: z.literal('a'), a: z.string() }), z.object({ kind: z.literal('b') })])
        .optional(),
    }),
    effect: (i) => i,
    resourceKey: () => 'r',
    sensitiveInput: ['blob'],
  });

  it('names the keys the schema declares, through optional, default and array', () => {
    const err = refusal(() =>
      op.parseInput({ address: { city: 7 }, items: [{ amount: 1 }, { amount: 'x' }], meta: { tag: 1 } }),
    );
    expect(err.publicMessage).toBe(
      'Invalid input of paths.run: address.city (invalid_type); items[1].amount (invalid_type); meta.tag (invalid_type)',
    );
  });

  it('never names a key the value brought, even one with no digit', () => {
    const keys = [`sk_live_${pick(LETTERS, 24)}`, `glpat-${pick(LETTERS, 20)}`, 'jane.doe', 'amount'];
    const err = refusal(() =>
      op.parseInput({
        address: { city: 'x' },
        blob: Object.fromEntries(keys.map((k) => [k, 1])),
        extra: { [keys[1] as string]: { n: 'x' } },
      }),
    );
    expect(err.publicMessage).toBe(
      'Invalid input of paths.run: blob.… (invalid_value); blob.… (invalid_value); blob.… (invalid_value); blob.… (invalid_value); extra.….n (invalid_type)',
    );
    // The developer's own copy still says where.
    expect(err.message).toContain(keys[0]);
  });

  it('a result refused by its schema: its declared fields only', () => {
    const withResult = testOperation({
      name: 'paths.result',
      input: z.object({}),
      effect: () => ({}),
      resourceKey: () => 'r',
      result: z.object({ charge: z.object({ id: z.string() }), byCard: z.record(z.string(), z.number()) }),
    });
    const secret = pick(LETTERS, 24);
    const err = refusal(() => withResult.parseResult({ charge: { id: 1 }, byCard: { [secret]: 'x' } }));
    expect(err.publicMessage).toBe('Invalid result of paths.result: charge.id (invalid_type); byCard.… (invalid_type)');
    expect(err.publicMessage).not.toContain(secret);
  });
});

describe('names an error may show', () => {
  it('keeps the codes and class names libraries use', () => {
    const names = [
      'ECONNREFUSED',
      'ERR_HTTP_HEADERS_SENT',
      'P2002',
      'card-declined',
      'maxRetriesPerRequest',
      'PrismaClientKnownRequestError',
      'SequelizeUniqueConstraintError',
      'ConditionalCheckFailedException',
      'StripeCardError',
      'StripeInvalidRequestError',
      'customerEmailAddress',
      'IDEMPOTENCY_INVALID_INPUT',
    ];
    expect(names.filter((n) => !isCleanName(n))).toEqual([]);
  });

  it('refuses random letters without a digit: mixed case from 16, one case over 16', () => {
    const share = (draw: () => string) => {
      let passed = 0;
      for (let i = 0; i < 1000; i++) if (isCleanName(draw())) passed++;
      return passed / 1000;
    };
    // Measured about 0.1% for 24 mixed-case letters and 1.4% for 16; bounds far above that.
    expect(share(() => `sk_live_${pick(LETTERS, 24)}`)).toBeLessThan(0.02);
    expect(share(() => pick(LETTERS, 20))).toBeLessThan(0.03);
    expect(share(() => `AKIA${pick('ABCDEFGHIJKLMNOPQRSTUVWXYZ', 16)}`)).toBe(0);
    expect(share(() => `key-${pick('abcdefghijklmnopqrstuvwxyz', 24)}`)).toBe(0);
  });
});

describe('a schema not migrated, met in a program', () => {
  it('names the command that migrates that schema, as the CLI does', () => {
    const err = new NotMigratedError('billing', ['idempotency_ledger']);
    expect(err.message).toBe(
      'schema billing is not migrated (missing idempotency_ledger): run `BQI_SCHEMA=billing npx bullmq-idempotency migrate` first',
    );
    expect(err.code).toBe('IDEMPOTENCY_NOT_MIGRATED');
  });
});
