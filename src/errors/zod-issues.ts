import type { z } from 'zod';
import type { ValidationIssue } from './errors.js';

/**
 * zod's issues as {@link ValidationIssue}s: path, message and zod's issue code. An array index is
 * written `[0]` and an object key `.key`, so a key made of digits (a card or a national number
 * used as a key) is never taken for an index: only indexes stay in clear in public messages.
 *
 * Given the schema that refused the value, each issue also carries its `publicPath`: the keys the
 * schema declares (code, not data) as they are, and every key it does not declare — a record's
 * keys, an unknown key, anything under a field whose keys are data — as `…`. A key the value
 * brought is data however it looks: a secret without a digit passes any grammar of names.
 */
export function zodIssues(error: z.ZodError, schema?: z.ZodType): Required<ValidationIssue>[] {
  return error.issues.map((i) => ({
    path: issuePath(i.path),
    message: i.message,
    code: i.code,
    publicPath: schema === undefined ? '' : declaredPath(schema, i.path),
  }));
}

function issuePath(path: readonly PropertyKey[]): string {
  let out = '';
  for (const segment of path) {
    if (typeof segment === 'number') out += `[${segment}]`;
    else out += out === '' ? String(segment) : `.${String(segment)}`;
  }
  return out;
}

/** zod 4's definition, as far as the walk below reads it. */
type Def = {
  type?: string;
  shape?: Record<string, z.ZodType>;
  element?: z.ZodType;
  innerType?: z.ZodType;
  in?: z.ZodType;
  options?: readonly z.ZodType[];
  left?: z.ZodType;
  right?: z.ZodType;
  getter?: () => z.ZodType;
  items?: readonly z.ZodType[];
  rest?: z.ZodType | null;
  catchall?: z.ZodType;
  valueType?: z.ZodType;
};

const defOf = (s: z.ZodType | undefined): Def | undefined =>
  (s as unknown as { _zod?: { def?: Def } } | undefined)?._zod?.def;

/** The schemas `s` stands for once its wrappers (optional, default, pipe, lazy...) are removed. */
function unwrap(s: z.ZodType | undefined, depth = 0): z.ZodType[] {
  const def = defOf(s);
  if (s === undefined || def === undefined || depth > 16) return [];
  switch (def.type) {
    case 'optional':
    case 'nullable':
    case 'default':
    case 'prefault':
    case 'catch':
    case 'readonly':
    case 'nonoptional':
    case 'success':
      return unwrap(def.innerType, depth + 1);
    case 'pipe':
      return unwrap(def.in, depth + 1);
    case 'lazy':
      return unwrap(def.getter?.(), depth + 1);
    case 'union':
      return (def.options ?? []).flatMap((o) => unwrap(o, depth + 1));
    case 'intersection':
      return [...unwrap(def.left, depth + 1), ...unwrap(def.right, depth + 1)];
    default:
      return [s];
  }
}

/**
 * One step down from `schemas` at `segment`: the schemas below it, and whether the segment is
 * declared (an object's own key, an index) or data (a record's key, a key its catchall took).
 */
function step(schemas: z.ZodType[], segment: PropertyKey): { next: z.ZodType[]; declared: boolean } {
  const next: z.ZodType[] = [];
  let declared = false;
  for (const s of schemas) {
    const def = defOf(s) as Def;
    if (def.type === 'object' && typeof segment === 'string' && def.shape && Object.hasOwn(def.shape, segment)) {
      declared = true;
      next.push(...unwrap(def.shape[segment]));
    } else if (def.type === 'object') {
      next.push(...unwrap(def.catchall));
    } else if (def.type === 'record') {
      next.push(...unwrap(def.valueType));
    } else if (def.type === 'array' && typeof segment === 'number') {
      declared = true;
      next.push(...unwrap(def.element));
    } else if (def.type === 'tuple' && typeof segment === 'number') {
      declared = true;
      next.push(...unwrap(def.items?.[segment] ?? def.rest ?? undefined));
    }
  }
  return { next, declared };
}

/** The path with every segment the schema does not declare as `…` (and all below it, once the schema is lost). */
function declaredPath(schema: z.ZodType, path: readonly PropertyKey[]): string {
  let schemas = unwrap(schema);
  let out = '';
  for (const segment of path) {
    const { next, declared } = step(schemas, segment);
    schemas = next;
    const shown = !declared ? '…' : typeof segment === 'number' ? `[${segment}]` : String(segment);
    if (shown === '…' && out.endsWith('…')) continue;
    out += shown.startsWith('[') ? shown : out === '' ? shown : `.${shown}`;
  }
  return out;
}
