import type { z } from 'zod';
import type { ValidationIssue } from './errors.js';

/** zod's issues as {@link ValidationIssue}s: dotted path, message and zod's issue code. */
export function zodIssues(error: z.ZodError): Required<ValidationIssue>[] {
  return error.issues.map((i) => ({ path: i.path.map(String).join('.'), message: i.message, code: i.code }));
}
