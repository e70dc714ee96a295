import { TRANSITION_CODES } from '../recorded-transition.js';
import { type ClaimGuard, claimsOfExistingRows, TRANSITIONS } from '../transitions.js';
import type { Transition } from '../types.js';

/*
 * The pieces of SQL several statements share. Each statement's full text, as Postgres receives
 * it, is in the `.sql` file beside the statement's module.
 */

/** The terminal states: a row in one expires (retention) and may be swept. */
export const TERMINAL = "('completed','failed','released','invalidated')";

/**
 * The database clock (plus the test-only offset, parameter `$p`): all time decisions are made by
 * Postgres, never by a worker's clock.
 */
export const now = (p: number) => `(now() + $${p}::int8 * interval '1 millisecond')`;

/** A timestamp as whole milliseconds since the epoch, truncated (as a JS Date built from it). */
export const ms = (column: string) => `floor(extract(epoch from ${column}) * 1000)::int8`;

/**
 * When row `x` expires: a terminal row's last transition plus its retention. Rows written since
 * migration 0008 store no expiry (it is this); rows from before keep the one they stored.
 */
export const expiresAt = (x: string) =>
  `coalesce(${x}.expires_at, case when ${x}.status in ${TERMINAL} then ${x}.updated_at + ${x}.retention_ms * interval '1 millisecond' end)`;

/** When row `x` completed: a completed row's last transition (stored by rows from before migration 0008). */
const completedAt = (x: string) =>
  `coalesce(${x}.completed_at, case when ${x}.status = 'completed' then ${x}.updated_at end)`;

/**
 * A fingerprint as the row stores it (migration 0009): a SHA-256 hex digest, what `fingerprint()`
 * makes, as its 32 bytes (half the text); any other text as its UTF-8 bytes, a NUL byte after a
 * text of exactly 32 bytes, so that the length tells the two apart (text never holds NUL).
 * A digest is 64 bytes with no character outside [0-9a-f]: the same test as `~ '^[0-9a-f]{64}$'`,
 * whose counted repetition cost Postgres about a quarter of a fresh insert's time per row.
 */
export const fpBytes = (t: string) =>
  `(case when octet_length(${t}) = 64 and ${t} !~ '[^0-9a-f]' then decode(${t}, 'hex')
    else convert_to(${t}, 'UTF8') || case when octet_length(${t}) = 32 then '\\x00'::bytea else ''::bytea end end)`;

/** The stored fingerprint `b` as the text it was made from (see fpBytes). */
const fpText = (b: string) =>
  `(case when length(${b}) = 32 then encode(${b}, 'hex') else convert_from(rtrim(${b}, '\\x00'::bytea), 'UTF8') end)`;

/** A claim guard as SQL over row alias `x`, the claimer's fingerprint `fp` and the database time `n`. */
const GUARDS: Record<ClaimGuard, (x: string, fp: string, n: string) => string> = {
  always: () => 'true',
  same_fingerprint: (x, fp) => `${x}.fingerprint = ${fp}`,
  expired: (x, _fp, n) => `${expiresAt(x)} <= ${n}`,
  lease_expired: (x, fp, n) => `${x}.lease_expires_at <= ${n} and ${x}.fingerprint = ${fp}`,
};

/** The downstream condition of a claim transition over the newest row version `l`. */
const DOWNSTREAM = { none: " and l.downstream = 'none'", other: " and l.downstream <> 'none'", any: '' } as const;

/** States as an SQL list of literals (they come from the transition table, never from input). */
const list = (states: readonly string[]) => states.map((s) => `'${s}'`).join(',');

/**
 * Whether row `x` is claimable by a claimer of fingerprint `fp` at database time `n`: the OR of
 * the guards of every claim transition of an existing row (generated from TRANSITIONS).
 */
export const claimable = (x: string, fp: string, n: string) =>
  `(${[...new Set(claimsOfExistingRows().map(({ spec }) => `(${x}.status in (${list(spec.from)}) and ${GUARDS[spec.guard](x, fp, n)})`))].join(' or ')})`;

/** The claim transition the upsert makes of the newest row version `l` (generated from TRANSITIONS). */
export const claimTransition = () =>
  `case ${claimsOfExistingRows()
    .map(
      ({ name, spec }) => `when l.status in (${list(spec.from)})${DOWNSTREAM[spec.downstream ?? 'any']} then '${name}'`,
    )
    .join(' ')} end`;

/** The upsert leaves the row unknown, not locked (a claim transition whose `to` is not `locked`). */
export const claimToUnknown = () =>
  `(${claimsOfExistingRows()
    .filter(({ spec }) => spec.to !== 'locked')
    .map(({ spec }) => `(l.status in (${list(spec.from)})${DOWNSTREAM[spec.downstream ?? 'any']})`)
    .join(' or ')})`;

/** The error code the upsert records on a row it leaves unknown: that transition's reason code. */
export const LEASE_EXPIRED = `'${TRANSITIONS.takeover_unknown.reasonCode}'`;

/**
 * The recorded transition appended by the statement that makes it (migration 0008, parsed by
 * `parseTransitions`): text, one JSON array per transition, `[code, epoch, ms, {facts}]`, joined
 * by commas. `ms` is the database time in whole milliseconds (the time the statement returns,
 * so the live event and the derived one carry the same time): since 1970 in the first entry,
 * since the first entry in the others (a few digits). Facts, nulls left out, the object left
 * out when empty: `o` owner, `j` job id, `q` queue, `k` task id, `c` error code, `p` the status
 * before (operators), `a` actor, `r` reason. No key names repeated per entry, no jsonb headers:
 * about 20 bytes a transition instead of about 70.
 */
const facts = (fields: string) =>
  `coalesce(',' || nullif(jsonb_strip_nulls(jsonb_build_object(${fields}))::text, '{}'), '')`;
export const entry = (code: string, epoch: string, at: string, fields?: string) =>
  `'[' || ${code} || ',' || ${epoch} || ',' || ${at}${fields ? ` || ${facts(fields)}` : ''} || ']'`;

/**
 * The first entry's time, the base of the others': the record starts `[code,epoch,ms` and the
 * time ends at the next comma or at the entry's `]` (a split, not a regular expression: every
 * completion reads it).
 */
const base = (column: string) => `rtrim(split_part(${column}, ',', 3), ']')::int8`;

/** The record of transitions `column` with one entry appended (the first when it is null). */
export const append = (column: string, code: string, epoch: string, n: string, fields?: string) =>
  `case when ${column} is null then ${entry(code, epoch, ms(n), fields)}
      else ${column} || ',' || ${entry(code, epoch, `(${ms(n)} - ${base(column)})`, fields)} end`;

/** A transition's stored code: a literal name's number, or a CASE over an SQL expression yielding a name. */
export const code = (name: string) =>
  Object.hasOwn(TRANSITION_CODES, name)
    ? String(TRANSITION_CODES[name as Transition])
    : `case (${name}) ${Object.entries(TRANSITION_CODES)
        .map(([t, c]) => `when '${t}' then ${c}`)
        .join(' ')} end`;

/** A claim's facts in the record of transitions, from input rows `i`. */
export const claimFacts = (i: string, owner = `${i}.owner`) =>
  `'o', ${owner}, 'j', ${i}.job_id, 'q', ${i}.queue, 'k', ${i}.task_id`;

/**
 * What a claim answers of row `x`: the replay's fields, times derived (see expiresAt) and sent
 * as whole milliseconds (int8, cut as the driver cuts timestamps, cheaper to read: every claim
 * and replay reads them).
 */
export const claimAnswer = (x: string, made = 'null::text') =>
  `${x}.key, ${x}.status, ${x}.epoch, ${fpText(`${x}.fingerprint`)} as fingerprint, ${ms(`${x}.lease_expires_at`)} as lease_expires_ms,
  ${x}.result, ${x}.error, ${ms(completedAt(x))} as completed_ms, ${ms(expiresAt(x))} as expires_ms, ${made} as transition`;

/** A write of the attempt holding the epoch: its key, its epoch, and still locked. */
export const FENCED = `key = $1 and epoch = $2 and status = 'locked'`;
