import { IdempotencyConfigError } from '../errors/errors.js';

/** A duration: whole milliseconds, or a string such as `'250ms'`, `'30s'`, `'5m'`, `'24h'`, `'7d'`. */
export type Duration = number | `${number}${'ms' | 's' | 'm' | 'h' | 'd'}`;

const UNIT_MS = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

/** What every duration in the API, the environment and the CLI accepts, for messages. */
export const DURATION_FORMS = "milliseconds or a duration such as '500ms', '30s', '5m', '24h', '7d'";

const DURATION_TEXT = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)?$/;

/**
 * Milliseconds of a duration written as text, or `undefined` when it is not one: digits alone are
 * milliseconds (`'60000'`), a unit may follow (`'1.5s'`, `'1m'`). The one parser behind
 * {@link toMs}, the environment (`BQI_SWEEP_EVERY_MS=1m`) and the CLI (`--timeout 5m`).
 */
export function parseDurationText(text: string): number | undefined {
  const m = DURATION_TEXT.exec(text.trim());
  if (!m) return undefined;
  const ms = Math.round(Number(m[1]) * UNIT_MS[(m[2] ?? 'ms') as keyof typeof UNIT_MS]);
  return Number.isSafeInteger(ms) && ms > 0 ? ms : undefined;
}

/** Parses a {@link Duration} once, at definition time, into milliseconds (the only unit used inside). */
export function toMs(value: Duration, option: string): number {
  const ms = typeof value === 'number' ? Math.round(value) : parseDurationText(String(value));
  if (ms === undefined || !Number.isSafeInteger(ms) || ms <= 0) {
    throw new IdempotencyConfigError(
      `${option} must be a positive duration: ${DURATION_FORMS}; got ${JSON.stringify(value)}`,
      {
        option,
      },
    );
  }
  return ms;
}

/**
 * Renders milliseconds, sign dropped (callers say "ago" or "in"), in at most two units:
 * `250ms`, `1.2s`, `42s`, `1m 30s`, `2h 5m`, `3d 4h`. The one formatter of the library, the CLI
 * and the operations process.
 */
export function formatDuration(ms: number): string {
  const abs = Math.abs(ms);
  if (abs < 1000) return `${Math.round(abs)}ms`;
  if (abs < 60_000) return `${(abs / 1000).toFixed(abs < 10_000 ? 1 : 0)}s`;
  const s = Math.floor(abs / 1000);
  const m = Math.floor(s / 60);
  const two = (big: number, bigUnit: string, small: number, smallUnit: string) =>
    small === 0 ? `${big}${bigUnit}` : `${big}${bigUnit} ${small}${smallUnit}`;
  if (m < 60) return two(m, 'm', s % 60, 's');
  const h = Math.floor(m / 60);
  if (h < 48) return two(h, 'h', m % 60, 'm');
  return two(Math.floor(h / 24), 'd', h % 24, 'h');
}
