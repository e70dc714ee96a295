import { normalizeName } from './normalize-name.js';

/**
 * A compiled field rule. Patterns are written as:
 *
 * - `apiKey`: a field of that name (compared after {@link normalizeName});
 * - `*token`: any field whose normalised name ends with `token` (`csrfToken`, `access_token`);
 * - `user.name`: a `name` field directly inside a `user` object, at any depth (array levels are
 *   skipped, so `users[3].name` matches too).
 */
export type FieldPattern =
  | { kind: 'exact'; name: string }
  | { kind: 'suffix'; suffix: string }
  | { kind: 'path'; name: string; parents: readonly string[] };

/** Why a pattern is unusable, or undefined when it is fine. */
export function fieldPatternProblem(pattern: string): string | undefined {
  if (pattern.length === 0 || pattern.length > 200) return 'must be 1 to 200 characters';
  if (pattern.startsWith('*')) {
    if (pattern.includes('.')) return 'a suffix pattern (*name) cannot also be a path';
    return normalizeName(pattern.slice(1)).length < 3
      ? 'a suffix pattern needs at least 3 letters or digits'
      : undefined;
  }
  if (pattern.includes('*')) return "'*' is only allowed as the first character";
  const segments = pattern.split('.');
  if (segments.some((s) => normalizeName(s).length === 0)) return 'every segment needs a letter or digit';
  return undefined;
}

/** Compiles a pattern that {@link fieldPatternProblem} accepted. */
export function parseFieldPattern(pattern: string): FieldPattern {
  if (pattern.startsWith('*')) return { kind: 'suffix', suffix: normalizeName(pattern.slice(1)) };
  const segments = pattern.split('.').map(normalizeName);
  const name = segments.pop() ?? '';
  return segments.length === 0 ? { kind: 'exact', name } : { kind: 'path', name, parents: segments };
}

/** A canonical spelling, so that `api_key` and `apiKey` count as the same rule. */
export function patternKey(p: FieldPattern): string {
  switch (p.kind) {
    case 'exact':
      return p.name;
    case 'suffix':
      return `*${p.suffix}`;
    case 'path':
      return [...p.parents, p.name].join('.');
  }
}
