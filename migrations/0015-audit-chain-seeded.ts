import { type Kysely, sql } from 'kysely';

/**
 * The chain's fold seeded with the head it continues (src/audit/insert-statement.ts):
 * `audit_chain_from(seed, d)`, an aggregate whose first step hashes the seed (the chain's head)
 * with the first digest, each later step the running link with the next. Run as a window over a
 * batch's events joined to their chain's head, it yields each event's link in the same pass, so
 * that the storing statement no longer joins its events back to a separate fold of them (a join
 * the planner, which cannot estimate a batch's size, ran as a nested loop: quadratic in the batch).
 * The step is PL/pgSQL: as an aggregate's step, a SQL function is not inlined, and its executor
 * costs more per call.
 */
export function auditChainSeededMigration(schema: string) {
  const t = (name: string) => sql.table(`${schema}.${name}`);
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await sql`create function ${t('audit_chain_from_step')}(state bytea, seed bytea, d bytea) returns bytea
        language plpgsql immutable parallel safe
        as $$ begin return sha256(coalesce(state, seed) || d); end $$`.execute(db);
      await sql`create aggregate ${t('audit_chain_from')}(bytea, bytea) (
        sfunc = ${t('audit_chain_from_step')}, stype = bytea
      )`.execute(db);
    },
    async down(db: Kysely<unknown>): Promise<void> {
      await sql`drop aggregate ${t('audit_chain_from')}(bytea, bytea)`.execute(db);
      await sql`drop function ${t('audit_chain_from_step')}(bytea, bytea, bytea)`.execute(db);
    },
  };
}
