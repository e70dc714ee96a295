import type { Queue } from 'bullmq';
import { type AuditBacklog, auditBacklog } from '../../audit/audit-backlog.js';
import { type DeadLetterStats, deadLetterStats } from '../../audit/dead-letters.js';
import { type RefKeyUsage, refKeyUsage } from '../../audit/ref-keys.js';
import { ServiceUnavailableError } from '../../config/errors.js';
import { ConfirmationStore } from '../../confirm/confirmation-store.js';
import { DEFAULT_SWEEPER_QUEUE, sweeperScheduled } from '../../jobs/ledger-sweeper.js';
import { LEDGER_STATUSES, type LedgerStats, ledgerStats } from '../../ledger/scans.js';
import { DEFAULT_RELAY_QUEUE, relayScheduled } from '../../ops/intent-relay-worker.js';
import type { CliContext } from '../context.js';
import { formatDuration, toJson } from '../format.js';

export type Stats = {
  schema: string;
  at: Date;
  ledger: LedgerStats;
  /** Confirmation requests waiting for an answer (`confirmations list --pending`). */
  confirmations: { pending: number; oldestPendingAt: Date | null };
  /**
   * The audit backlog (`lagMs`: the age of the oldest event not yet written, as `/metrics` has
   * it); the audit queue is read when REDIS_URL is set and answers, else `queue` is null, only the
   * outbox counts and `queueNotRead` says why.
   */
  audit: AuditBacklog & { deadLetters: DeadLetterStats; queueNotRead?: string };
  /**
   * The operations process's job schedules, kept only in Redis: `true` when present. A missing one
   * (Redis lost its data) is re-created by a running operations process at its next check; null
   * when Redis was not read.
   */
  schedules: { sweeper: boolean; relay: boolean } | null;
  /**
   * Keyed refs stored in the identifier columns (trail, ledger, confirmations) by key id, and
   * those made under a key the keyring (`BQI_KEYRING`) does not hold; null without a keyring.
   */
  refs: RefKeyUsage | null;
};

/**
 * The audit queue, when REDIS_URL names a Redis that answers. Stats are what an operator reads
 * during an outage, so an unreachable Redis costs the queue's figures only, never the command.
 */
async function auditQueueOf(ctx: CliContext): Promise<{ queue?: Queue; notRead?: string }> {
  if (!ctx.config.redisUrl) return { notRead: 'REDIS_URL unset' };
  try {
    return { queue: await ctx.queue(ctx.config.auditQueue) };
  } catch (err) {
    if (!(err instanceof ServiceUnavailableError)) throw err;
    return { notRead: `Redis unreachable: ${err.reason}` };
  }
}

/** Reads the figures an operator watches: Postgres, and the audit queue in Redis when REDIS_URL is set. */
export async function collectStats(ctx: CliContext): Promise<Stats> {
  const pool = await ctx.pool();
  const s = ctx.schema;
  const auditQueue = await auditQueueOf(ctx);
  const keyring = ctx.config.keyring;
  const [ledger, confirmations, backlog, deadLetters, sweeper, relay, refs] = await Promise.all([
    ledgerStats(pool, s),
    new ConfirmationStore(pool, s).pending(),
    auditBacklog(pool, s, auditQueue.queue),
    deadLetterStats(pool, s),
    auditQueue.queue ? sweeperScheduled(await ctx.queue(DEFAULT_SWEEPER_QUEUE)) : null,
    auditQueue.queue ? relayScheduled(await ctx.queue(DEFAULT_RELAY_QUEUE)) : null,
    keyring ? refKeyUsage(pool, s, keyring.ids) : null,
  ]);
  return {
    schema: s,
    at: ledger.at,
    ledger,
    confirmations: { pending: confirmations.count, oldestPendingAt: confirmations.oldestAt },
    audit: { ...backlog, deadLetters, ...(auditQueue.notRead ? { queueNotRead: auditQueue.notRead } : {}) },
    schedules: sweeper === null || relay === null ? null : { sweeper, relay },
    refs,
  };
}

const ago = (d: Date | null, now: Date) => (d ? `${formatDuration(now.getTime() - d.getTime())} ago` : '-');

export function renderStats(st: Stats): string {
  const now = st.at;
  const L = st.ledger;
  const lines = [`ledger (schema ${st.schema})`];
  for (const status of LEDGER_STATUSES) {
    let note = '';
    if (status === 'locked' && L.oldestLease) {
      const exp = L.oldestLease.leaseExpiresAt;
      note = `  oldest lease: ${L.oldestLease.key}, claimed ${ago(L.oldestLease.claimedAt, now)} by ${L.oldestLease.owner ?? '?'}, ${
        exp && exp.getTime() <= now.getTime()
          ? `expired ${ago(exp, now)}`
          : `expires in ${formatDuration((exp?.getTime() ?? 0) - now.getTime())}`
      }; ${L.expiredLeases} expired lease${L.expiredLeases === 1 ? '' : 's'}`;
    }
    if (status === 'unknown' && L.unknown > 0) {
      note = `  oldest ${ago(L.oldestUnknownAt, now)}; needs an operator: \`list --status unknown\` names them, then inspect and resolve`;
    }
    lines.push(`  ${status.padEnd(12)} ${String(L.byStatus[status]).padStart(10)}${note}`);
  }
  lines.push(`  ${'total'.padEnd(12)} ${String(L.total).padStart(10)}`);
  const C = st.confirmations;
  lines.push(
    `confirmations pending ${C.pending}${C.oldestPendingAt ? `, oldest asked ${ago(C.oldestPendingAt, now)}: \`confirmations list --pending\`` : ''}`,
  );
  const A = st.audit;
  lines.push(
    'audit',
    `  lag           ${
      A.oldestPendingAt
        ? `${formatDuration(A.lagMs)}: the oldest event not yet written was made ${A.oldestPendingAt.toISOString()}`
        : '0 (every event is written)'
    }`,
    `  audit queue   ${
      A.queue
        ? `${A.queue.waiting} waiting, ${A.queue.delayed} delayed, ${A.queue.active} active, ${A.queue.failed} failed`
        : `not read (${A.queueNotRead ?? 'no Redis'}): the lag counts the outbox only`
    }`,
    `  outbox        ${A.outbox.batches} batch${A.outbox.batches === 1 ? '' : 'es'} (${A.outbox.events} events)${
      A.outbox.oldestAt ? `, oldest ${ago(A.outbox.oldestAt, now)}; drained by backfill` : ''
    }`,
    `  dead letters  ${A.deadLetters.count}${A.deadLetters.newestAt ? ` (newest ${ago(A.deadLetters.newestAt, now)})` : ''}`,
    `schedules`,
    `  sweeper       ${
      st.schedules === null
        ? 'not read (no Redis)'
        : st.schedules.sweeper
          ? 'scheduled'
          : 'MISSING from Redis: a running operations process re-creates it at its next check (one sweep interval)'
    }`,
    `  intent relay  ${
      st.schedules === null
        ? 'not read (no Redis)'
        : st.schedules.relay
          ? 'scheduled'
          : 'MISSING from Redis: a running operations process re-creates it at its next check (one relay interval)'
    }`,
  );
  lines.push(`refs          ${renderRefs(st.refs)}`);
  return lines.join('\n');
}

function renderRefs(refs: RefKeyUsage | null): string {
  if (refs === null) return 'not checked (BQI_KEYRING unset)';
  const held = Object.entries(refs.byKey).filter(([k]) => !refs.unknown.some((u) => u.keyId === k));
  const told = held.length === 0 ? 'none' : held.map(([k, n]) => `${n} under ${k}`).join(', ');
  if (refs.unknown.length === 0) return `${told}; every key that made them is in the keyring`;
  const unknown = refs.unknown.map((u) => `${u.refs} under ${u.keyId}`).join(', ');
  return `${told}; UNKNOWN KEY: ${unknown}, made by a key the keyring does not hold (a process without BQI_KEYRING, or a key removed): lookups by a clear id cannot find them`;
}

export async function statsCommand(ctx: CliContext, opts: { json?: boolean }): Promise<void> {
  ctx.require('DATABASE_URL');
  const st = await collectStats(ctx);
  ctx.io.out(opts.json ? toJson(st) : renderStats(st));
}
