/** Errors of configuration and start-up, free of heavy imports (the CLI loads them first). */

/** A configuration error; `variables` names every offending environment variable. */
export class ConfigError extends Error {
  readonly variables: string[];

  constructor(issues: { variable: string; message: string }[]) {
    super(issues.map((i) => `BQI_CONFIG: ${i.variable} ${i.message}`).join('\n'));
    this.name = 'ConfigError';
    this.variables = issues.map((i) => i.variable);
  }
}

/** Postgres or Redis could not be reached (or refused the session) within the timeout. */
export class ServiceUnavailableError extends Error {
  constructor(
    readonly service: 'Postgres' | 'Redis',
    readonly target: string,
    readonly reason: string,
  ) {
    super(`cannot reach ${service} at ${target}: ${reason}`);
    this.name = 'ServiceUnavailableError';
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
