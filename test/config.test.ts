import { describe, expect, it } from 'vitest';
import { loadCliConfig, loadConfig } from '../src/config/env.js';

const base = { DATABASE_URL: 'postgres://u@127.0.0.1:5432/db', REDIS_URL: 'redis://127.0.0.1:6379' };

describe('BQI_PREPARED_STATEMENTS', () => {
  it('is on by default, off with false or 0, for the operations process and the CLI alike', () => {
    expect(loadConfig(base).preparedStatements).toBe(true);
    expect(loadConfig({ ...base, BQI_PREPARED_STATEMENTS: 'false' }).preparedStatements).toBe(false);
    expect(loadConfig({ ...base, BQI_PREPARED_STATEMENTS: '0' }).preparedStatements).toBe(false);
    expect(loadCliConfig({ BQI_PREPARED_STATEMENTS: 'false' }).preparedStatements).toBe(false);
    expect(loadCliConfig({}).preparedStatements).toBe(true);
  });

  it('refuses anything else, naming the variable', () => {
    expect(() => loadConfig({ ...base, BQI_PREPARED_STATEMENTS: 'maybe' })).toThrow(/BQI_PREPARED_STATEMENTS/);
  });
});
