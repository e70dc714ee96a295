import { randomBytes } from 'node:crypto';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('..', import.meta.url));

describe('README', () => {
  it("the tour's TypeScript snippets, read in order as one module, type-check against the library", () => {
    const readme = readFileSync(`${root}README.md`, 'utf8');
    const blocks = [...readme.matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1] as string);
    expect(blocks.length).toBeGreaterThanOrEqual(2);
    const source = `${blocks.map((b) => b.replaceAll("from 'bullmq-idempotency'", "from '../src/index.js'")).join('\n')}\nexport {};\n`;
    const file = `${root}test/.readme-${randomBytes(4).toString('hex')}.ts`;
    writeFileSync(file, source);
    try {
      const config = ts.readConfigFile(`${root}tsconfig.json`, ts.sys.readFile);
      const parsed = ts.parseJsonConfigFileContent(config.config, ts.sys, root);
      const program = ts.createProgram([file], { ...parsed.options, noEmit: true });
      const diagnostics = ts
        .getPreEmitDiagnostics(program)
        .filter((d) => d.file?.fileName === file)
        .map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n'));
      expect(diagnostics).toEqual([]);
    } finally {
      rmSync(file, { force: true });
    }
  }, 60_000);
});
