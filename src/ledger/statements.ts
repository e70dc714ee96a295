import { TRANSITION_CODES } from './recorded-transition.js';
import { type ClaimGuard, claimsOfExistingRows, TRANSITIONS } from './transitions.js';
import type { Transition } from './types.js';

/** The terminal states: a row in one expires (retention) and may be swept. */
const TERMINAL = "('completed','failed','released','invalidated')";

/**
 * When row `x` expires: a terminal row's last transition plus its retention. Rows written since
 * migration 0008 store no expiry (it is this); rows from before keep the one they stored.
 */
const expiresAt = (x: string) =>
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
const fpBytes = (t: string) =>
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
 * SQL text of the ledger's statements for one table. They run as named prepared statements
 * (see PostgresLedger), parsed and planned once per connection: unnamed, as behind a pooler in
 * transaction mode (`preparedStatements: false`), `npm run bench:ledger` measures 0.85–0.91× the
 * rate of fresh pairs and 0.68–0.85× of replays. Every statement touches one key.
 *
 * `$now` stands for the database clock (plus a test-only offset parameter): all time decisions
 * are made by Postgres, never by a worker's clock.
 */
export function ledgerStatements(table: string, auditEventIds = `${table.split('.')[0]}.audit_event_ids`) {
  const now = (p: number) => `(now() + $${p}::int8 * interval '1 millisecond')`;
  /** A timestamp as whole milliseconds since the epoch, truncated (as a JS Date built from it). */
  const ms = (column: string) => `floor(extract(epoch from ${column}) * 1000)::int8`;
  /** A claimable row: the OR of the guards of every claim transition of an existing row (see TRANSITIONS). */
  const claimable = (x: string, fp: string, n: string) =>
    `(${[...new Set(claimsOfExistingRows().map(({ spec }) => `(${x}.status in (${list(spec.from)}) and ${GUARDS[spec.guard](x, fp, n)})`))].join(' or ')})`;
  /** The claim transition the upsert makes of the newest row version `l` (see TRANSITIONS). */
  const claimTransition = `case ${claimsOfExistingRows()
    .map(
      ({ name, spec }) => `when l.status in (${list(spec.from)})${DOWNSTREAM[spec.downstream ?? 'any']} then '${name}'`,
    )
    .join(' ')} end`;
  /** The upsert leaves the row unknown, not locked (a claim transition whose `to` is not `locked`). */
  const claimToUnknown = `(${claimsOfExistingRows()
    .filter(({ spec }) => spec.to !== 'locked')
    .map(({ spec }) => `(l.status in (${list(spec.from)})${DOWNSTREAM[spec.downstream ?? 'any']})`)
    .join(' or ')})`;
  /** The error code the upsert records on a row it leaves unknown: that transition's reason code. */
  const leaseExpired = `'${TRANSITIONS.takeover_unknown.reasonCode}'`;
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
  const entry = (code: string, epoch: string, at: string, fields?: string) =>
    `'[' || ${code} || ',' || ${epoch} || ',' || ${at}${fields ? ` || ${facts(fields)}` : ''} || ']'`;
  /**
   * The first entry's time, the base of the others': the record starts `[code,epoch,ms` and the
   * time ends at the next comma or at the entry's `]` (a split, not a regular expression: every
   * completion reads it).
   */
  const base = (column: string) => `rtrim(split_part(${column}, ',', 3), ']')::int8`;
  const append = (column: string, code: string, epoch: string, n: string, fields?: string) =>
    `case when ${column} is null then ${entry(code, epoch, ms(n), fields)}
      else ${column} || ',' || ${entry(code, epoch, `(${ms(n)} - ${base(column)})`, fields)} end`;
  /** A transition's stored code: a literal name's number, or a CASE over an SQL expression yielding a name. */
  const code = (name: string) =>
    Object.hasOwn(TRANSITION_CODES, name)
      ? String(TRANSITION_CODES[name as Transition])
      : `case (${name}) ${Object.entries(TRANSITION_CODES)
          .map(([t, c]) => `when '${t}' then ${c}`)
          .join(' ')} end`;
  const claimFacts = (i: string, owner = `${i}.owner`) =>
    `'o', ${owner}, 'j', ${i}.job_id, 'q', ${i}.queue, 'k', ${i}.task_id`;
  /**
   * What a claim answers of row `x`: the replay's fields, times derived (see expiresAt) and sent
   * as whole milliseconds (int8, cut as the driver cuts timestamps, cheaper to read: every claim
   * and replay reads them).
   */
  const cols = (x: string, made = 'null::text') =>
    `${x}.key, ${x}.status, ${x}.epoch, ${fpText(`${x}.fingerprint`)} as fingerprint, ${ms(`${x}.lease_expires_at`)} as lease_expires_ms,
  ${x}.result, ${x}.error, ${ms(completedAt(x))} as completed_ms, ${ms(expiresAt(x))} as expires_ms, ${made} as transition`;
  /**
   * The transition the upsert made, by name: its insert makes `claimed` at epoch 1 (which no
   * update of a row makes: an update raises the epoch), its update the one it chose and wrote
   * (claimTransition). Not the `last_transition` column alone: an insert leaves it null by design
   * (the record of transitions holds it, migration 0008), and a key the full claim inserted came
   * back with no transition the outcome mapping could read.
   */
  const made = `case when epoch = 1 then 'claimed' else last_transition end as made`;
  const returning = `key, status, epoch, fingerprint, lease_expires_at, result, error, completed_at, expires_at, updated_at, retention_ms, ${made}`;
  const N = now(15);
  /**
   * A claim's `sweep_after` (migration 0010): the claim's time plus the retention, before which
   * the row cannot expire (it expires a retention after its last transition, which is not
   * earlier than this claim). Written by claims only, so a completion changes no indexed column.
   */
  const sweepAfter = (i: string) => `${N} + ${i}.retention_ms * interval '1 millisecond'`;
  const fenced = `key = $1 and epoch = $2 and status = 'locked'`;
  /**
   * The claim statements' input: $1..$14, one array per field (CLAIM_FIELDS' order), and $16 each
   * claim's facts as the record stores them (JSON text or null, made by `claimFactsText`), as rows `i`.
   */
  const claimInput = `unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::int8[], $8::int8[],
    $9::text[], $10::text[], $11::text[], $12::text[], $13::text[], $14::text[], $16::text[])
    as i(key, namespace, resource_key, version, operation, fingerprint, lease_ms, retention_ms, downstream, owner,
      job_id, queue, task_id, step_id, facts)`;
  /** The insert of a claimed row (epoch 1, locked) for each input row `i`; its FROM follows. */
  const insertClaimed = `insert into ${table} as l (key, namespace, resource_key, version, operation, fingerprint, status, epoch,
    downstream, lease_owner, lease_expires_at, retention_ms, last_transition, job_id, queue, task_id, step_id, created_at,
    updated_at, claimed_at, claim_transition, transitions, sweep_after)
  select i.key, i.namespace, i.resource_key, i.version, i.operation, ${fpBytes('i.fingerprint')}, 'locked', 1, i.downstream, i.owner,
    ${N} + i.lease_ms * interval '1 millisecond', i.retention_ms, null, i.job_id, i.queue, i.task_id, i.step_id,
    null, ${N}, null, null, '[' || ${code('claimed')} || ',1,' || ${ms(N)} || coalesce(',' || i.facts, '') || ']', ${sweepAfter('i')}`;
  return {
    /**
     * The claim, for one key or a batch of distinct keys (arrays of equal length): one statement.
     * `cur` reads the rows; a key whose row is not claimable (a replay, a conflict, a live lease)
     * writes nothing at all. The others go through the upsert, which arbitrates: of any number of
     * concurrent claimers of a key exactly one gets its row back from `ins`. The upsert's WHERE
     * re-checks claimability on the newest row version, so a stale snapshot never wins twice.
     * Rows are inserted in key order so concurrent batches lock in the same order.
     * Params (arrays): 1 key, 2 namespace, 3 resource_key, 4 version, 5 operation, 6 fingerprint,
     * 7 lease_ms, 8 retention_ms, 9 downstream, 10 owner, 11 job_id, 12 queue, 13 task_id,
     * 14 step_id; 15 clock offset ms; 16 facts (JSON text or null, see claimFactsText).
     */
    claim: `with i as (select * from ${claimInput}),
cur as (select l.*, ${fpBytes('i.fingerprint')} as want from ${table} l join i on l.key = i.key),
ins as (
  ${insertClaimed}
  from i
  where not exists (select 1 from cur c where c.key = i.key and not ${claimable('c', 'c.want', N)})
  order by i.key
  on conflict (key) do update set
    status = case when ${claimToUnknown} then 'unknown' else 'locked' end,
    epoch = l.epoch + 1,
    lease_owner = case when ${claimToUnknown} then null else excluded.lease_owner end,
    lease_expires_at = case when ${claimToUnknown} then null else excluded.lease_expires_at end,
    last_transition = ${claimTransition},
    error = case when ${claimToUnknown}
      then jsonb_build_object('code', ${leaseExpired}, 'message',
        'the attempt holding epoch ' || l.epoch || ' lost its lease before recording an outcome; the downstream has no idempotent API or lookup')
      else null end,
    operation = excluded.operation,
    fingerprint = excluded.fingerprint,
    downstream = case when l.status = 'locked' then l.downstream else excluded.downstream end,
    retention_ms = excluded.retention_ms, sweep_after = excluded.sweep_after,
    result = null, retryable = null, completed_at = null, expires_at = null,
    job_id = excluded.job_id, queue = excluded.queue,
    task_id = coalesce(excluded.task_id, l.task_id), step_id = coalesce(excluded.step_id, l.step_id),
    updated_at = excluded.updated_at, claimed_at = null, claim_transition = null,
    transitions = ${append('l.transitions', code(claimTransition), 'l.epoch + 1', N, `${claimFacts('excluded', 'excluded.lease_owner')}, 'c', case when ${claimToUnknown} then ${leaseExpired} end`)}
  where ${claimable('l', 'excluded.fingerprint', N)}
  returning ${returning}
)
select ${cols('ins', 'ins.made')}, true as acquired, true as claimable, null::int8 as retry_after_ms, ${ms('updated_at')} as at_ms from ins
union all
select ${cols('c')}, false, ${claimable('c', 'c.want', N)},
  case when c.status = 'locked' then greatest(0, ceil(extract(epoch from (c.lease_expires_at - ${N})) * 1000))::int8 end,
  ${ms(N)}
from cur c where not exists (select 1 from ins where ins.key = c.key)`,

    /**
     * The claim's read: each key's row and whether it is claimable, without writing. A row that
     * is not claimable (a replay, a conflict, a live lease, unknown) is answered from here alone;
     * read-only, it costs no commit. Params: 1 keys, 2 fingerprints; 3 clock offset.
     */
    peek: `select ${cols('l')}, false as acquired,
  ${claimable('l', fpBytes('i.want'), now(3))} as claimable,
  case when l.status = 'locked' then greatest(0, ceil(extract(epoch from (l.lease_expires_at - ${now(3)})) * 1000))::int8 end
    as retry_after_ms,
  ${ms(now(3))} as at_ms
from unnest($1::text[], $2::text[]) as i(key, want) join ${table} l on l.key = i.key`,

    /**
     * The claim of keys the read found absent: a plain insert. A key that has a row returns no
     * row and goes through the full claim; a key a concurrent claimer inserted meanwhile fails
     * the whole statement (unique violation, 23505), whose keys then all go through the full
     * claim. Not `on conflict do nothing`: that writes each row as a speculative insertion,
     * confirmed by a WAL record of its own (48 bytes per row). Params as the claim's.
     * Returns only the key and the database time as whole milliseconds (an int8, cheaper to read
     * than a timestamp, and cut as the driver cuts timestamps): the rest of a new row is known.
     */
    insertNew: `${insertClaimed}
  from ${claimInput}
  where not exists (select 1 from ${table} x where x.key = i.key)
  order by i.key
  returning key, ${ms('updated_at')} as at_ms`,

    /**
     * The write-back of a lost record (transition `record_lost`): the attempt holding epoch $17
     * found its row gone, or at a lower epoch (a restore, a promoted asynchronous standby). The row
     * comes back `unknown` at that epoch with the error $18 (code `IDEMPOTENCY_RECORD_LOST`), so a
     * retry or a duplicate job meets it and does not run; a row already at that epoch or above
     * (another attempt wrote it) is left alone and no row is returned. The record of transitions
     * starts again with this one when the row was gone (the rest went with it).
     * Params: 1..16 as the claim's (one key); 17 epoch; 18 error json.
     */
    recordLost: `insert into ${table} as l (key, namespace, resource_key, version, operation, fingerprint, status, epoch,
    downstream, retention_ms, job_id, queue, task_id, step_id, updated_at, error, transitions, sweep_after)
  select i.key, i.namespace, i.resource_key, i.version, i.operation, ${fpBytes('i.fingerprint')}, 'unknown', $17::int4,
    i.downstream, i.retention_ms, i.job_id, i.queue, i.task_id, i.step_id, ${N}, $18::jsonb,
    ${entry(code('record_lost'), '$17::int4', ms(N), `'o', i.owner, 'j', i.job_id, 'q', i.queue, 'k', i.task_id, 'c', $18::jsonb->>'code'`)},
    ${sweepAfter('i')}
  from ${claimInput}
  on conflict (key) do update set status = 'unknown', epoch = excluded.epoch, error = excluded.error,
    lease_owner = null, lease_expires_at = null, last_transition = null, result = null, retryable = null,
    completed_at = null, expires_at = null, claimed_at = null, claim_transition = null,
    operation = excluded.operation, fingerprint = excluded.fingerprint, downstream = excluded.downstream,
    retention_ms = excluded.retention_ms, job_id = excluded.job_id, queue = excluded.queue,
    task_id = coalesce(excluded.task_id, l.task_id), step_id = coalesce(excluded.step_id, l.step_id),
    updated_at = excluded.updated_at,
    transitions = ${append('l.transitions', code('record_lost'), 'excluded.epoch', N, `'j', excluded.job_id, 'q', excluded.queue, 'k', excluded.task_id, 'c', excluded.error->>'code'`)}
  where l.epoch < excluded.epoch
  returning ${ms('updated_at')} as at_ms`,

    /** Params: 1 key, 2 epoch, 3 lease_ms, 4 clock offset. */
    heartbeat: `update ${table} set lease_expires_at = ${now(4)} + $3::int8 * interval '1 millisecond'
where ${fenced} returning lease_expires_at, ${now(4)} as at`,

    /**
     * Completion of one key or a batch of distinct keys, each fenced by its epoch; returns each
     * completed key and the database time in whole milliseconds. The job id and queue columns
     * are cleared: the claim's entry in the record of transitions holds them (`j`, `q`), and a
     * completed row is kept for its retention, so they would be stored twice for as long (a
     * row from before the record keeps them).
     * Params: 1 keys, 2 epochs, 3 results (json text); 4 clock offset.
     */
    complete: `update ${table} t set status = 'completed', result = u.result::jsonb, error = null, retryable = null,
  lease_owner = null, lease_expires_at = null, last_transition = null,
  job_id = case when t.transitions is null then t.job_id end, queue = case when t.transitions is null then t.queue end,
  completed_at = null, expires_at = null, updated_at = ${now(4)},
  transitions = ${append('t.transitions', code('completed'), 't.epoch', now(4))}
from unnest($1::text[], $2::int4[], $3::text[]) as u(key, epoch, result)
where t.key = u.key and t.epoch = u.epoch and t.status = 'locked' returning t.key, ${ms('t.updated_at')} as at_ms`,

    /**
     * Params: 1 key, 2 epoch, 3 error json, 4 clock offset, 5 new status, 6 transition, 7 retryable,
     * 8 the reason code of a release that records no error (the record's `c` fact).
     */
    finish: `update ${table} set status = $5, error = $3::jsonb, retryable = $7, result = null,
  lease_owner = null, lease_expires_at = null, last_transition = null,
  expires_at = null,
  updated_at = ${now(4)},
  transitions = ${append('transitions', code('$6::text'), 'epoch', now(4), `'c', coalesce($3::jsonb->>'code', $8::text)`)}
where ${fenced} returning ${ms('updated_at')} as at_ms`,

    /** Params: 1 key. */
    current: `select epoch, status from ${table} where key = $1`,

    /** Params: 1 key. */
    get: `select * from ${table} where key = $1`,

    /**
     * Params: 1 key, 2 clock offset, 3 actor, 4 reason. Evicts the record and fences any holder
     * (epoch + 1); who and why are recorded with the transition.
     */
    invalidate: `with prev as (select key, status from ${table} where key = $1 for update)
update ${table} t set status = 'invalidated', epoch = t.epoch + 1, result = null, retryable = null,
  lease_owner = null, lease_expires_at = null, last_transition = null,
  expires_at = null, updated_at = ${now(2)},
  transitions = ${append('t.transitions', code('invalidated'), 't.epoch + 1', now(2), `'p', prev.status, 'a', $3::text, 'r', $4::text`)}
from prev where t.key = prev.key returning t.epoch, prev.status as previous_status, ${ms('t.updated_at')} as at_ms`,

    /** Params: 1 key, 2 result json or null, 3 clock offset, 4 committed, 5 actor, 6 reason. */
    resolve: `update ${table} set
  status = case when $4::boolean then '${TRANSITIONS.resolved_committed.to}' else '${TRANSITIONS.resolved_not_committed.to}' end,
  result = case when $4::boolean then $2::jsonb else null end,
  last_transition = null,
  epoch = epoch + 1,
  completed_at = null, expires_at = null, updated_at = ${now(3)},
  transitions = ${append('transitions', `case when $4::boolean then ${TRANSITION_CODES.resolved_committed} else ${TRANSITION_CODES.resolved_not_committed} end`, 'epoch + 1', now(3), `'a', $5::text, 'r', $6::text`)}
where key = $1 and status = 'unknown' returning epoch, ${ms('updated_at')} as at_ms`,

    /**
     * The sweep's candidates: expired terminal rows after the cursor (`$3` sweep_after as text,
     * `$4` key), found by the index on `sweep_after` (no row expires before it, see migration
     * 0010) and checked against their real expiry, in index order, locked for the transaction
     * that deletes them, skipping rows another transaction holds.
     * Params: 1 batch size, 2 clock offset, 3 after sweep_after (text), 4 after key.
     */
    sweepCandidates: `select *, sweep_after::text as cursor_at from ${table} l
  where sweep_after <= ${now(2)} and (sweep_after > $3::timestamptz or (sweep_after = $3::timestamptz and key > $4::text))
    and status in ${TERMINAL} and ${expiresAt('l')} <= ${now(2)}
  order by sweep_after, key limit $1 for update skip locked`,

    /** The ids among $1 that are stored in the audit trail (its table of event ids, one row per stored event). */
    storedEventIds: `select event_id from ${auditEventIds} where event_id = any($1::text[])`,

    /** Params: 1 keys (locked by sweepCandidates in the same transaction). */
    sweepKeys: `delete from ${table} where key = any($1::text[])`,
  };
}

export type LedgerStatements = ReturnType<typeof ledgerStatements>;
