/**
 * The README and the guides link to each other by file and heading: every relative link names a
 * file that exists and, with `#anchor`, a heading of that file (GitHub's slugs). A guide being
 * written elsewhere may be linked before it lands (PENDING).
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, normalize, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** Linked before it is in the tree: the operators' guide is written beside these. */
const PENDING = new Set(['docs/operators.md']);

const DOCS = [
  'README.md',
  ...readdirSync(join(ROOT, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
];

/** The text outside fenced blocks: a `#` line in a code block is no heading, a `](x)` no link. */
function prose(text: string): string {
  return text.replace(/^```[^\n]*\n[\s\S]*?^```$/gm, '');
}

/** GitHub's anchor of a heading: lower case, punctuation dropped but `-` and `_`, spaces to `-`. */
function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

function anchors(doc: string): Set<string> {
  const text = prose(readFileSync(join(ROOT, doc), 'utf8'));
  return new Set([...text.matchAll(/^#{1,6} (.+)$/gm)].map((m) => slug(m[1] as string)));
}

describe('links of README.md and docs/*.md', () => {
  const links = DOCS.flatMap((doc) =>
    [...prose(readFileSync(join(ROOT, doc), 'utf8')).matchAll(/\]\(([^)\s]+)\)/g)]
      .map((m) => m[1] as string)
      .filter((target) => !/^[a-z]+:/.test(target))
      .map((target) => ({ doc, target })),
  );

  it('slugs as GitHub makes them', () => {
    expect(slug("Confirmations: a person's yes before a side effect")).toBe(
      'confirmations-a-persons-yes-before-a-side-effect',
    );
    expect(slug('createIdempotency(options)')).toBe('createidempotencyoptions');
    expect(slug('Speed, cost and scale')).toBe('speed-cost-and-scale');
  });

  it('every relative link names a file that exists, and a heading of it', () => {
    expect(links.length).toBeGreaterThan(30);
    const broken: string[] = [];
    for (const { doc, target } of links) {
      const [path, anchor] = target.split('#') as [string, string | undefined];
      const file = path === '' ? doc : relative(ROOT, normalize(join(ROOT, dirname(doc), path)));
      if (!existsSync(join(ROOT, file))) {
        if (!PENDING.has(file)) broken.push(`${doc}: ${target} (no ${file})`);
        continue;
      }
      if (anchor !== undefined && file.endsWith('.md') && !anchors(file).has(anchor)) {
        broken.push(`${doc}: ${target} (no heading #${anchor} in ${file})`);
      }
    }
    expect(broken).toEqual([]);
  });
});
