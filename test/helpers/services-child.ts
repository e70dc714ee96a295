/**
 * Runs the demo's and the test suite's service resolution (scripts/services.ts) in a child
 * process and prints what it chose as JSON. argv: a JSON ServicesOptions.
 */
import { type ServicesOptions, services } from '../../scripts/services.js';

const options = JSON.parse(process.argv[2] ?? '{}') as ServicesOptions;
const svc = await services(options);
process.stdout.write(`${JSON.stringify({ databaseUrl: svc.databaseUrl, redisUrl: svc.redisUrl })}\n`);
await svc.stop();
