/**
 * SQL of the confirmation requests, for one table. Every time decision (the timeout) is made by
 * Postgres, `now()`, never a worker's clock. Not hot: a request is asked once per attempt of an
 * operation that waits, and answered once, so these run unnamed.
 */
export function confirmationStatements(table: string, ledger = `${table.split('.')[0]}.idempotency_ledger`) {
  const row = `t.*, now() as read_at, (t.status = 'pending' and t.expires_at <= now()) as overdue`;
  return {
    /**
     * Get or create. A request made concurrently by another worker returns no row here (its
     * insert committed after this statement's snapshot): the caller runs it again.
     * Params: 1 operation_key, 2 name, 3 operation, 4 reason, 5 details, 6 on_timeout,
     * 7 timeout_ms, 8 task_id, 9 job_id, 10 queue, 11 epoch.
     */
    request: `with ins as (
  insert into ${table} (operation_key, name, operation, reason, details, status, on_timeout, timeout_ms, task_id,
    job_id, queue, requested_epoch, requested_at, expires_at)
  values ($1, $2, $3, $4, $5::jsonb, 'pending', $6, $7::int8, $8, $9, $10, $11, now(),
    now() + $7::int8 * interval '1 millisecond')
  on conflict (operation_key, name) do nothing
  returning *
)
select ${row}, true as created from ins t
union all
select ${row}, false from ${table} t where t.operation_key = $1 and t.name = $2 and not exists (select 1 from ins)`,

    /** Params: 1 n. */
    get: `select ${row} from ${table} t where t.n = $1`,

    /**
     * Records a person's answer, once, while the request is pending and before its timeout.
     * Params: 1 n, 2 status, 3 answered_by, 4 reason_code, 5 comment.
     */
    answer: `update ${table} t set status = $2, answered_at = now(), answered_by = $3, answered_by_type = 'user',
  reason_code = $4, comment = $5
where t.n = $1 and t.status = 'pending' and t.expires_at > now()
returning ${row}`,

    /**
     * Records the timeout of a pending request whose time has run out; the timeout happened at
     * `expires_at`, whoever notices it. Params: 1 n, 2 reason_code.
     */
    timeout: `update ${table} t set status = 'timed_out', answered_at = t.expires_at, answered_by = 'timeout',
  answered_by_type = 'system', reason_code = $2
where t.n = $1 and t.status = 'pending' and t.expires_at <= now()
returning ${row}`,

    /**
     * Adds a parked job to the ones an answer wakes (at most 100; the others find the answer at
     * their next re-check). Params: 1 n, 2 waiter as a one-element JSON array.
     */
    addWaiter: `update ${table} t set waiters = t.waiters || $2::jsonb
where t.n = $1 and t.status = 'pending' and jsonb_array_length(t.waiters) < 100 and not t.waiters @> $2::jsonb`,

    /** Params: 1 only pending (boolean), 2 limit, 3 after n (0 for the first page). */
    list: `select ${row} from ${table} t where (not $1::boolean or t.status = 'pending') and t.n > $3
order by t.n limit $2`,

    /** Params: 1 task id. */
    byTask: `select ${row} from ${table} t where t.task_id = any($1::text[]) order by t.n`,

    /** Params: 1 operation key. */
    byOperation: `select ${row} from ${table} t where t.operation_key = $1 order by t.n`,

    /**
     * The sweep's candidates: answered or timed-out requests whose operation has left the ledger
     * (swept), after a position in id order, locked for the transaction that deletes them. A
     * pending request is never a candidate. Params: 1 batch size, 2 after n (0 for the first page).
     */
    sweepCandidates: `select ${row} from ${table} t
where t.status <> 'pending' and t.n > $2::int8
  and not exists (select 1 from ${ledger} l where l.key = t.operation_key)
order by t.n limit $1 for update of t skip locked`,

    /** The ids among $1 that are stored in the audit trail. */
    storedEventIds: `select event_id from ${table.split('.')[0]}.audit_event_ids where event_id = any($1::text[])`,

    /** Params: 1 ids (n) locked by sweepCandidates in the same transaction. */
    sweepRows: `delete from ${table} where n = any($1::int8[])`,

    /** No params. */
    pending: `select count(*)::int8 as n, min(requested_at) as oldest, now() as read_at from ${table} where status = 'pending'`,
  };
}
