import { migrate } from '../../../migrations/migrate.js';
import type { CliContext } from '../context.js';
import { toJson } from '../format.js';

export async function migrateCommand(ctx: CliContext, opts: { json?: boolean }): Promise<void> {
  const pool = await ctx.pool();
  const result = await migrate({ pool, schema: ctx.schema });
  const applied = result.results?.filter((r) => r.status === 'Success').map((r) => r.migrationName) ?? [];
  if (opts.json) ctx.io.out(toJson({ schema: ctx.schema, applied }));
  else
    ctx.io.out(
      applied.length > 0
        ? `applied ${applied.join(', ')} in schema ${ctx.schema}`
        : `schema ${ctx.schema} is up to date`,
    );
}
