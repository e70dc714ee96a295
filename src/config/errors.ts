/** Errors of configuration and start-up, free of heavy imports (the CLI loads them first). */
import { ERROR_CODES, IdempotencyError } from '../errors/idempotency-error.js';

/**
 * A configuration error; `variables` names every offending environment variable (or the flag
 * given in its place). The message has one line per issue, `VARIABLE what is wrong`; the CLI and
 * the operations process print each line after the code (`IDEMPOTENCY_ENV_CONFIG: …`).
 */
export class ConfigError extends IdempotencyError<typeof ERROR_CODES.envConfig> {
  constructor(issues: { variable: string; message: string }[]) {
    super(ERROR_CODES.envConfig, issues.map((i) => `${i.variable} ${i.message}`).join('\n'), {
      variables: issues.map((i) => i.variable),
    });
  }

  /** Every offending environment variable (the same as `details.variables`). */
  get variables(): string[] {
    return this.details.variables;
  }
}

/** Postgres or Redis could not be reached (or refused the session) within the timeout. */
export class ServiceUnavailableError extends IdempotencyError<typeof ERROR_CODES.serviceUnavailable> {
  constructor(service: 'Postgres' | 'Redis', target: string, reason: string) {
    super(ERROR_CODES.serviceUnavailable, `cannot reach ${service} at ${target}: ${reason}`, {
      service,
      target,
      reason,
    });
  }

  get service(): 'Postgres' | 'Redis' {
    return this.details.service;
  }

  get target(): string {
    return this.details.target;
  }

  get reason(): string {
    return this.details.reason;
  }
}

/** A readable reason for a failure (Node's AggregateError of a dual-stack connect has no message). */
export function reasonOf(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  const code = (err as { code?: unknown }).code;
  let message = err.message;
  if (!message && err instanceof AggregateError) {
    message = [...new Set(err.errors.map((e) => (e instanceof Error ? e.message : String(e))))].join('; ');
  }
  if (!message) message = err.name;
  return typeof code === 'string' && !message.includes(code) ? `${code}: ${message}` : message;
}

/** A URL fit for messages and logs: no password, no query string. */
export function describeUrl(url: string): string {
  try {
    const u = new URL(url);
    return `${u.protocol}//${u.username ? `${u.username}@` : ''}${u.host}${u.pathname === '/' ? '' : u.pathname}`;
  } catch {
    return '(unparseable URL)';
  }
}
