import {
  type DatabaseIntrospector,
  type DatabaseMetadata,
  type Kysely,
  PostgresDialect,
  type PostgresDialectConfig,
  type SchemaMetadata,
  sql,
  type TableMetadata,
} from 'kysely';

/**
 * What kysely's migrator asks of the database (does the schema exist, which tables does it
 * hold), answered for one schema only. kysely's own Postgres introspector lists every column of
 * every table of the database and calls `pg_get_serial_sequence` on each: a table or column
 * another session drops meanwhile, in any schema, fails it ("column … does not exist"), so a
 * migration could fail because an unrelated application was changing its own tables.
 * Table names only (the migrator needs no more): no columns are read.
 */
export class SchemaIntrospector implements DatabaseIntrospector {
  constructor(
    private readonly db: Kysely<unknown>,
    private readonly schema: string,
  ) {}

  async getSchemas(): Promise<SchemaMetadata[]> {
    const rows = await sql<{ name: string }>`select nspname as name from pg_catalog.pg_namespace
      where nspname = ${this.schema}`.execute(this.db);
    return rows.rows.map((r) => ({ name: r.name }));
  }

  async getTables(): Promise<TableMetadata[]> {
    const rows = await sql<{ name: string; kind: string }>`select c.relname as name, c.relkind as kind
      from pg_catalog.pg_class c join pg_catalog.pg_namespace n on n.oid = c.relnamespace
      where n.nspname = ${this.schema} and c.relkind in ('r', 'p', 'v', 'm')`.execute(this.db);
    return rows.rows.map((r) => ({ name: r.name, schema: this.schema, isView: r.kind === 'v', columns: [] }));
  }

  async getMetadata(): Promise<DatabaseMetadata> {
    return { tables: await this.getTables() };
  }
}

/** A Postgres dialect whose introspection sees one schema (see {@link SchemaIntrospector}). */
export class SchemaScopedPostgresDialect extends PostgresDialect {
  constructor(
    config: PostgresDialectConfig,
    private readonly schema: string,
  ) {
    super(config);
  }

  override createIntrospector(db: Kysely<unknown>): DatabaseIntrospector {
    return new SchemaIntrospector(db, this.schema);
  }
}
