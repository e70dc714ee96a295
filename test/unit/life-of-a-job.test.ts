/**
 * docs/life-of-a-job.md names, step by step, the file and the function that handle a job: each
 * file must exist and define the function it is named with (`Class.method`: the class and its
 * method), and every `.sql` file it names must be a statement's text in src/ledger/sql/.
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const DOC = readFileSync(join(ROOT, 'docs/life-of-a-job.md'), 'utf8');

/** The table's rows: `| n | \`file\` | \`function\` | … |`. */
const STEPS = [...DOC.matchAll(/^\| (\d+) \| `([^`]+)` \| `([^`]+)` \|/gm)].map((m) => ({
  step: Number(m[1]),
  file: m[2] as string,
  name: m[3] as string,
}));

/** Whether `text` defines `name`: a function, class, constant or type, or a method (`  name(`). */
function defines(text: string, name: string): boolean {
  const n = name.replace(/[$]/g, '\\$');
  return new RegExp(
    `(?:^|\\n)(?:export )?(?:async )?(?:function\\*? |class |const |let |type )${n}\\b|\\n  (?:private |readonly |static )*(?:async )?${n}\\(`,
  ).test(text);
}

describe('docs/life-of-a-job.md', () => {
  it('names its steps in order', () => {
    expect(STEPS.length).toBeGreaterThanOrEqual(15);
    expect(STEPS.map((s) => s.step)).toEqual(STEPS.map((_, i) => i + 1));
  });

  it('every file and function it names exists', () => {
    const missing = STEPS.filter(({ file, name }) => {
      const path = join(ROOT, file);
      if (!existsSync(path)) return true;
      const text = readFileSync(path, 'utf8');
      const [owner, member] = name.split('.');
      return member === undefined
        ? !defines(text, owner as string)
        : !defines(text, owner as string) || !defines(text, member);
    });
    expect(missing).toEqual([]);
  });

  it('every statement text it names is in src/ledger/sql/', () => {
    const named = [...DOC.matchAll(/`(?:src\/ledger\/sql\/)?([\w-]+\.sql)`/g)].map((m) => m[1] as string);
    expect(named.length).toBeGreaterThan(5);
    expect(named.filter((f) => !existsSync(join(ROOT, 'src/ledger/sql', f)))).toEqual([]);
  });

  it('catches a name that does not exist', () => {
    expect(defines('export class A {\n  async run(job) {}\n}', 'run')).toBe(true);
    expect(defines('export class A {\n  async run(job) {}\n}', 'walk')).toBe(false);
  });
});
