import { spawn, spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { machineHas } from '../helpers/machine.js';
import { childEnv, collect, finished, nodeArgs, ROOT } from '../helpers/spawn.js';

/**
 * On a machine where nothing answers on Postgres's or Redis's ports and no container runtime is
 * there (a network namespace of its own: loopback only, nothing listening), the demo's services
 * are an embedded PostgreSQL and BullMQ's PostgreSQL backend for the queues; a short run on them
 * commits once, and stopping removes the embedded server's data.
 */
const canUnshare = machineHas(
  'test/processes/demo-embedded.test.ts',
  'a network namespace of its own',
  spawnSync('unshare', ['-n', 'true']).status === 0,
  'run as root, or where unshare -n is allowed',
);

describe('the demo on a bare machine', () => {
  it.runIf(canUnshare)(
    'starts an embedded PostgreSQL, puts the queues on BullMQ’s PostgreSQL backend, and removes its data after',
    async () => {
      const node = [process.execPath, ...nodeArgs('test/helpers/embedded-services-child.ts')]
        .map((a) => `'${a.replace(/'/g, "'\\''")}'`)
        .join(' ');
      const child = collect(
        spawn('unshare', ['-n', 'sh', '-c', `ip link set lo up && exec ${node}`], {
          cwd: ROOT,
          env: childEnv({ DATABASE_URL: undefined, REDIS_URL: undefined }),
          stdio: ['ignore', 'pipe', 'pipe'],
        }),
      );
      const done = await finished(child, 150_000, 'the embedded services child');
      expect(done.code, done.stderr).toBe(0);
      const lines = done.stdout
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l));
      expect(lines[0]).toEqual({ absorbed: true });
      expect(lines[1]).toMatchObject({
        databaseScheme: 'postgres:',
        queueScheme: 'postgres:',
        embedded: true,
        dataDirGone: true,
        commits: 1,
      });
      expect(new Set(lines[1].results).size).toBe(1);
      expect(done.stderr).toContain('embedded PostgreSQL');
      expect(done.stderr).toContain("BullMQ's PostgreSQL backend for the queues");
    },
    180_000,
  );
});
