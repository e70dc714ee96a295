import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import packageJson from '../../package.json' with { type: 'json' };
import { CHILD_BUILD_ENV } from '../helpers/child-build.js';
import { builtScript, childEnv, nodeArgs, runTs } from '../helpers/spawn.js';

const dir = process.env[CHILD_BUILD_ENV];

describe('the JavaScript child processes run', () => {
  it('is built by the global setup, one .js per source a child may load', () => {
    expect(dir).toEqual(expect.stringContaining('bqi-child-build-'));
    for (const script of ['src/cli/main.ts', 'jobs/main.ts', 'test/helpers/crash-worker.ts', 'migrations/index.ts']) {
      expect(builtScript(script)).toBe(join(dir as string, script.replace(/\.ts$/, '.js')));
      expect(existsSync(builtScript(script) as string)).toBe(true);
    }
  });

  it('maps an absolute path too; a script outside the repository or not TypeScript runs as given', () => {
    const abs = join(process.cwd(), 'src/cli/main.ts');
    expect(nodeArgs(abs)).toEqual(['--enable-source-maps', join(dir as string, 'src/cli/main.js')]);
    expect(nodeArgs('/tmp/elsewhere.ts')).toEqual(['--import', 'tsx', '/tmp/elsewhere.ts']);
    expect(nodeArgs('src/testing/missing.ts')).toEqual(['--import', 'tsx', 'src/testing/missing.ts']);
  });

  it('a built child runs: the CLI prints the package version', async () => {
    const run = await runTs('src/cli/main.ts', ['--version'], childEnv({}));
    expect({ code: run.code, stdout: run.stdout.trim() }).toEqual({ code: 0, stdout: packageJson.version });
  });

  it('without a build, children run the TypeScript through tsx', async () => {
    const saved = process.env[CHILD_BUILD_ENV];
    delete process.env[CHILD_BUILD_ENV];
    try {
      expect(nodeArgs('src/cli/main.ts')).toEqual(['--import', 'tsx', 'src/cli/main.ts']);
      const run = await runTs('src/cli/main.ts', ['--version'], childEnv({}), 50_000);
      expect({ code: run.code, stdout: run.stdout.trim() }).toEqual({ code: 0, stdout: packageJson.version });
    } finally {
      process.env[CHILD_BUILD_ENV] = saved;
    }
  });
});
