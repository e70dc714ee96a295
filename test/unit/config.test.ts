import { describe, expect, it } from 'vitest';
import { loadCliConfig, loadConfig } from '../../src/config/env.js';
import { type Duration, parseDurationText, toMs } from '../../src/operation/duration.js';

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

describe('durations', () => {
  const forms: [string, number][] = [
    ['60000', 60_000],
    ['500ms', 500],
    ['1.5s', 1_500],
    ['30s', 30_000],
    ['1m', 60_000],
    ['24h', 86_400_000],
    ['7d', 604_800_000],
  ];

  it.each(forms)('%s is the same duration in the API, the environment and the CLI', (text, ms) => {
    expect(toMs(text as Duration, 'retention')).toBe(ms);
    expect(loadConfig({ ...base, BQI_SWEEP_EVERY_MS: text }).sweepEveryMs).toBe(ms);
    expect(loadConfig({ ...base, BQI_SHUTDOWN_TIMEOUT_MS: text }).shutdownTimeoutMs).toBe(ms);
    expect(parseDurationText(text)).toBe(ms); // the parser of `backfill --timeout`
  });

  it.each(['soon', '1 min', '-5s', '0', '5w'])('%s is refused everywhere, naming the option', (text) => {
    expect(() => toMs(text as Duration, 'lease')).toThrow(/^lease must be a positive duration/);
    expect(() => loadConfig({ ...base, BQI_SWEEP_EVERY_MS: text })).toThrow(
      /BQI_SWEEP_EVERY_MS must be a positive duration/,
    );
    expect(parseDurationText(text)).toBeUndefined();
  });
});
