/**
 * Keys as operators paste them, and the ledger record one names: every command that takes a key
 * reads it here, so a typo (exit 2) and a key without a record (exit 5) are told apart the same way.
 */
import { InvalidIdempotencyKeyError } from '../errors/errors.js';
import { boundedKey, parseCanonicalKey } from '../keys/idempotency-key.js';
import type { LedgerRecord } from '../ledger/types.js';
import type { CliContext } from './context.js';
import { type CliError, notFound, usageError } from './errors.js';

/** The hashed bounded form: the canonical string's first 200 characters, `#`, a base64url SHA-256. */
const HASHED_FORM = /^[\x21-\x7e]{200}#[A-Za-z0-9_-]{43}$/;

const FORM = 'expected namespace:resourceKey:version with percent-encoded parts, as ctx.idempotencyKey shows it';

/**
 * A key as operators paste it: the bounded key (the ledger's primary key, `ctx.idempotencyKey`),
 * or a canonical key of any length (bounded here). Parts pasted with fewer escapes than the
 * canonical form (`acme/assets.create`) are re-encoded to it. Anything that is no key's form is a
 * usage error (exit 2), so a typo is told apart from a key that has no record (exit 5).
 */
export function normalizeKey(text: string): string {
  const key = text.trim();
  if (key.length === 0) throw usageError('the key must not be empty');
  if (key.includes('#')) {
    if (HASHED_FORM.test(key)) return key;
    throw malformed(key, `only a hashed bounded key has a '#' (200 characters, '#', 43 of a digest); ${FORM}`);
  }
  try {
    return boundedKey(parseCanonicalKey(key));
  } catch (err) {
    if (!(err instanceof InvalidIdempotencyKeyError)) throw err;
    const why = err.details.issues.map((i) => (i.path ? `${i.path} ${i.message}` : FORM)).join('; ');
    throw malformed(key, why);
  }
}

function malformed(key: string, why: string) {
  const jobHint = key.startsWith('idem_')
    ? ' (this looks like a BullMQ job id: `inspect --job <queue> <id>` reads the key its job carries)'
    : '';
  // What was pasted is never echoed: a key's place is where a secret gets pasted by mistake,
  // and stderr is often logged. Its length tells a cut paste from a typo.
  return usageError(`malformed key (${key.length} characters, not echoed): ${why}${jobHint}`);
}

/** A key of the right form that names no record: the message says what to give instead. */
export function missingKey(key: string): CliError {
  const hint = key.startsWith('idem_')
    ? ' (this looks like a BullMQ job id: use `inspect --job <queue> <id>`)'
    : ' (give the bounded key, namespace:resourceKey:version with percent-encoded parts, as ctx.idempotencyKey shows it)';
  return notFound(`no ledger record for key ${key}${hint}`);
}

/** The ledger record of a key, or the not-found of {@link missingKey}. */
export async function getRecord(ctx: CliContext, key: string): Promise<LedgerRecord> {
  const record = await (await ctx.ledger()).get(key);
  if (!record) throw missingKey(key);
  return record;
}
