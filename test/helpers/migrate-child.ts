/**
 * Runs migrate() in its own OS process, for the concurrent-migration test.
 * Usage: node --import tsx test/helpers/migrate-child.ts <connectionString> <schema>
 * Prints `ready` once loaded, waits for one line on stdin (the start signal, so that every
 * process starts at once), then prints the migration results as one JSON line.
 */
import { migrate } from '../../migrations/migrate.js';

const [connectionString, schema] = process.argv.slice(2);
if (!connectionString || !schema) {
  process.stderr.write('usage: migrate-child.ts <connectionString> <schema>\n');
  process.exit(2);
}

process.stdout.write('ready\n');
await new Promise<void>((resolve) => {
  process.stdin.once('data', () => resolve());
  process.stdin.once('end', () => resolve());
});
process.stdin.destroy();

const result = await migrate({ connectionString, schema });
process.stdout.write(`${JSON.stringify(result.results ?? [])}\n`);
