import type pg from 'pg';

/**
 * What the operations process reads at start about how the ledger's commits survive a failover:
 * `synchronous_commit`, `synchronous_standby_names` and the standbys attached (`pg_stat_replication`;
 * `syncState` is null where the role may not read it: grant `pg_monitor` to see it).
 */
export type ReplicationFacts = {
  synchronousCommit: string;
  synchronousStandbyNames: string;
  standbys: readonly { name: string; syncState: string | null }[];
};

/**
 * Why an acknowledged claim could be lost (see docs/replication.md):
 * - `async_standby`: a standby replicates asynchronously; promoted, it lacks the newest commits;
 * - `commit_not_replicated`: standbys are attached but `synchronous_commit` is `off` or `local`,
 *   so a commit is acknowledged before any standby has it;
 * - `commit_not_flushed`: no standby, and `synchronous_commit` is `off`: a crash loses the commits
 *   of the last moments (up to three times `wal_writer_delay`).
 */
export type ReplicationRiskReason = 'async_standby' | 'commit_not_replicated' | 'commit_not_flushed';

export type ReplicationRisk = {
  reasons: ReplicationRiskReason[];
  /** The standbys that replicate asynchronously (by `application_name`). */
  asyncStandbys: string[];
};

/**
 * Decides from the values read whether a claim Postgres acknowledged could be lost by a failover
 * or a crash; `null` when none of the reasons holds. The ledger needs every acknowledged write
 * to survive: synchronous replication with `synchronous_commit` `on` or `remote_apply` to the
 * standbys a failover may promote, or one primary on durable storage with `synchronous_commit` on.
 * A lost record is caught (IDEMPOTENCY_RECORD_LOST: written back `unknown`, never run again by
 * itself), but it costs an operator's decision per key.
 */
export function replicationRisk(f: ReplicationFacts): ReplicationRisk | null {
  const commit = f.synchronousCommit.toLowerCase();
  const asyncStandbys = f.standbys.filter((s) => s.syncState === 'async' || s.syncState === 'potential');
  const reasons: ReplicationRiskReason[] = [];
  if (asyncStandbys.length > 0) reasons.push('async_standby');
  if (f.standbys.length > 0 && (commit === 'off' || commit === 'local')) reasons.push('commit_not_replicated');
  if (f.standbys.length === 0 && commit === 'off') reasons.push('commit_not_flushed');
  return reasons.length === 0 ? null : { reasons, asyncStandbys: asyncStandbys.map((s) => s.name) };
}

/** Reads the {@link ReplicationFacts} of the server `pool` connects to (three cheap reads). */
export async function readReplicationFacts(pool: pg.Pool): Promise<ReplicationFacts> {
  const settings = await pool.query<{ commit: string; names: string }>(
    `select current_setting('synchronous_commit') as commit, current_setting('synchronous_standby_names') as names`,
  );
  const standbys = await pool.query<{ name: string; sync_state: string | null }>(
    'select application_name as name, sync_state from pg_stat_replication',
  );
  const row = settings.rows[0];
  return {
    synchronousCommit: row?.commit ?? 'on',
    synchronousStandbyNames: row?.names ?? '',
    standbys: standbys.rows.map((r) => ({ name: r.name, syncState: r.sync_state })),
  };
}
