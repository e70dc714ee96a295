import { readFileSync } from 'node:fs';

let version: string | undefined;

/** The library's version, from its package.json ('0.0.0' when it cannot be read). Read once. */
export function packageVersion(): string {
  if (version !== undefined) return version;
  version = '0.0.0';
  // src/shared (tsx) or dist/src/shared (built): the package root is two or three levels up.
  for (const up of ['../../package.json', '../../../package.json']) {
    try {
      const pkg = JSON.parse(readFileSync(new URL(up, import.meta.url), 'utf8')) as { name?: string; version?: string };
      if (pkg.name === 'bullmq-idempotency' && pkg.version) {
        version = pkg.version;
        break;
      }
    } catch {
      // try the next level
    }
  }
  return version;
}
