import type { FieldVerdict } from './field-class.js';
import { type FieldPattern, parseFieldPattern } from './field-pattern.js';
import { normalizeName } from './normalize-name.js';

/** A compiled rule: a pattern and what it decides. */
export type FieldRule = { pattern: string; verdict: FieldVerdict };

type PathRule = { parents: readonly string[]; verdict: FieldVerdict };

/**
 * Decides the class of a field from its name and the names of the objects around it.
 *
 * Precedence: a path rule (`user.name`, longest first) beats an exact name, which beats a suffix
 * (longest first). Exact names are a Map lookup; the few suffixes are `endsWith` tests.
 */
export class NameMatcher {
  readonly #exact = new Map<string, FieldVerdict>();
  readonly #suffixes: { suffix: string; verdict: FieldVerdict }[] = [];
  readonly #paths = new Map<string, PathRule[]>();

  constructor(rules: readonly FieldRule[]) {
    for (const { pattern, verdict } of rules) this.#add(parseFieldPattern(pattern), verdict);
    this.#suffixes.sort((a, b) => b.suffix.length - a.suffix.length);
    for (const list of this.#paths.values()) list.sort((a, b) => b.parents.length - a.parents.length);
  }

  #add(p: FieldPattern, verdict: FieldVerdict): void {
    if (p.kind === 'exact') this.#exact.set(p.name, verdict);
    else if (p.kind === 'suffix') this.#suffixes.push({ suffix: p.suffix, verdict });
    else {
      const list = this.#paths.get(p.name) ?? [];
      list.push({ parents: p.parents, verdict });
      this.#paths.set(p.name, list);
    }
  }

  /** Verdict from the name alone (exact, then suffix); paths are checked by {@link classify}. */
  byName(norm: string): FieldVerdict | undefined {
    const exact = this.#exact.get(norm);
    if (exact !== undefined) return exact;
    for (const { suffix, verdict } of this.#suffixes) if (norm.endsWith(suffix)) return verdict;
    return undefined;
  }

  /** Path rules whose last segment is `norm`, if any: the caller then needs the ancestors. */
  pathRules(norm: string): readonly PathRule[] | undefined {
    return this.#paths.get(norm);
  }

  /**
   * The verdict for a field. `ancestors` are the normalised names of the enclosing object keys,
   * innermost last (array levels are not in it).
   */
  classify(norm: string, ancestors: readonly string[], byName = this.byName(norm)): FieldVerdict | undefined {
    const rules = this.#paths.get(norm);
    if (rules) {
      for (const rule of rules) if (endsWith(ancestors, rule.parents)) return rule.verdict;
    }
    return byName;
  }

  /** Convenience for callers holding raw names. */
  classifyName(name: string, ancestors: readonly string[] = []): FieldVerdict | undefined {
    return this.classify(normalizeName(name), ancestors.map(normalizeName));
  }
}

function endsWith(ancestors: readonly string[], parents: readonly string[]): boolean {
  const offset = ancestors.length - parents.length;
  if (offset < 0) return false;
  for (let i = 0; i < parents.length; i++) if (ancestors[offset + i] !== parents[i]) return false;
  return true;
}
