/** `npm run migrate`: creates or upgrades the library's tables in DATABASE_URL (schema from DB_SCHEMA). */
import { migrate } from '../src/index.js';

const connectionString = process.env.DATABASE_URL;
if (!connectionString) {
  process.stderr.write('DATABASE_URL is not set (e.g. postgres://postgres@127.0.0.1:5432/postgres)\n');
  process.exit(2);
}
const schema = process.env.DB_SCHEMA ?? 'public';
const result = await migrate({ connectionString, schema });
const applied = result.results?.filter((r) => r.status === 'Success').map((r) => r.migrationName) ?? [];
process.stdout.write(
  applied.length > 0 ? `applied ${applied.join(', ')} in schema ${schema}\n` : `schema ${schema} is up to date\n`,
);
