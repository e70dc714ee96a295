import { type Kysely, sql } from 'kysely';
import { CHAIN_HEAD_MISSING, chainDaySql, eventDigestSql, GENESIS_SQL } from '../src/audit/chain-sql.js';

/**
 * Tamper evidence for the audit trail (src/audit/chain-sql.ts): three chain columns on
 * `audit_events`, the chains' heads (`audit_chains`) and the last heads of dropped days
 * (`audit_chain_anchors`), the fold `audit_chain(bytea)` (an aggregate: the running SHA-256
 * chain, as a window over a chain's events), and `audit_chain_missing()`, which the store's
 * statement calls to fail whole when a head it needs does not exist yet. Events already stored
 * are chained here, each day in slot 0, in (created_at, event_id) order.
 */
export function auditChainMigration(schema: string) {
  const t = (name: string) => sql.table(`${schema}.${name}`);
  const raw = (text: string) => sql.raw(text);
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await sql`create function ${t('audit_chain_step')}(state bytea, d bytea) returns bytea
        language sql immutable parallel safe
        as $$ select case when octet_length(state) = 0 then d else sha256(state || d) end $$`.execute(db);
      await sql`create aggregate ${t('audit_chain')}(bytea) (
        sfunc = ${t('audit_chain_step')}, stype = bytea, initcond = ''
      )`.execute(db);
      await sql`create function ${t('audit_chain_missing')}() returns bigint language plpgsql volatile
        as ${sql.lit(`begin raise exception '${CHAIN_HEAD_MISSING}' using errcode = 'P0001'; end`)}`.execute(db);
      await sql`alter table ${t('audit_events')}
        add column chain_slot smallint, add column chain_seq bigint, add column chain_digest bytea`.execute(db);
      await sql`create table ${t('audit_chains')} (
        day date not null, slot smallint not null, seq bigint not null, digest bytea not null,
        primary key (day, slot)
      )`.execute(db);
      await sql`create table ${t('audit_chain_anchors')} (
        day date not null, slot smallint not null, seq bigint not null, digest bytea not null,
        partition text, dropped_at timestamptz not null default now(),
        primary key (day, slot)
      )`.execute(db);
      // The events already stored: one chain per day, slot 0.
      const day = raw(chainDaySql('e.created_at'));
      await sql`with r as (
          select ${day} as day, row_number() over (partition by ${day} order by e.created_at, e.event_id) as ord,
                 e.created_at, e.event_id, ${raw(eventDigestSql('e', 1))} as d
          from ${t('audit_events')} e
          union all
          select distinct ${day}, 0, null::timestamptz, null::text, ${raw(GENESIS_SQL)} from ${t('audit_events')} e
        ),
        f as (select r.*, ${t('audit_chain')}(r.d) over (partition by r.day order by r.ord) as link from r)
        update ${t('audit_events')} e set chain_slot = 0, chain_seq = f.ord, chain_digest = f.link
        from f where f.ord > 0 and e.created_at = f.created_at and e.event_id = f.event_id`.execute(db);
      await sql`insert into ${t('audit_chains')} (day, slot, seq, digest)
        select distinct on (${day}) ${day}, 0, e.chain_seq, e.chain_digest from ${t('audit_events')} e
        order by ${day}, e.chain_seq desc`.execute(db);
    },
    async down(db: Kysely<unknown>): Promise<void> {
      await sql`drop table ${t('audit_chain_anchors')}`.execute(db);
      await sql`drop table ${t('audit_chains')}`.execute(db);
      await sql`alter table ${t('audit_events')}
        drop column chain_slot, drop column chain_seq, drop column chain_digest`.execute(db);
      await sql`drop function ${t('audit_chain_missing')}()`.execute(db);
      await sql`drop aggregate ${t('audit_chain')}(bytea)`.execute(db);
      await sql`drop function ${t('audit_chain_step')}(bytea, bytea)`.execute(db);
    },
  };
}
