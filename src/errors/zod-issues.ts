import type { z } from 'zod';
import type { ValidationIssue } from './errors.js';

/**
 * zod's issues as {@link ValidationIssue}s: path, message and zod's issue code. An array index is
 * written `[0]` and an object key `.key`, so a key made of digits (a card or a national number
 * used as a key) is never taken for an index: only indexes stay in clear in public messages.
 */
export function zodIssues(error: z.ZodError): Required<ValidationIssue>[] {
  return error.issues.map((i) => ({ path: issuePath(i.path), message: i.message, code: i.code }));
}

function issuePath(path: readonly PropertyKey[]): string {
  let out = '';
  for (const segment of path) {
    if (typeof segment === 'number') out += `[${segment}]`;
    else out += out === '' ? String(segment) : `.${String(segment)}`;
  }
  return out;
}
