import { IdempotencyConfigError } from '../errors/errors.js';

/** A duration: whole milliseconds, or a string such as `'250ms'`, `'30s'`, `'5m'`, `'24h'`, `'7d'`. */
export type Duration = number | `${number}${'ms' | 's' | 'm' | 'h' | 'd'}`;

const UNIT_MS = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

/** Parses a {@link Duration} once, at definition time, into milliseconds (the only unit used inside). */
export function toMs(value: Duration, option: string): number {
  let ms: number;
  if (typeof value === 'number') {
    ms = value;
  } else {
    const m = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)$/.exec(String(value).trim());
    if (!m) {
      throw new IdempotencyConfigError(
        `${option} must be milliseconds or a string like '30s', got ${JSON.stringify(value)}`,
        {
          option,
        },
      );
    }
    ms = Number(m[1]) * UNIT_MS[m[2] as keyof typeof UNIT_MS];
  }
  if (!Number.isFinite(ms) || ms <= 0) {
    throw new IdempotencyConfigError(`${option} must be a positive duration, got ${JSON.stringify(value)}`, { option });
  }
  return Math.round(ms);
}

/** Renders milliseconds for error messages: `90000` → `1m 30s`. */
export function formatMs(ms: number): string {
  if (ms < 1000) return `${ms}ms`;
  const parts: string[] = [];
  let rest = Math.round(ms / 1000);
  for (const [unit, size] of [
    ['d', 86_400],
    ['h', 3_600],
    ['m', 60],
    ['s', 1],
  ] as const) {
    if (rest >= size) {
      parts.push(`${Math.floor(rest / size)}${unit}`);
      rest %= size;
    }
  }
  return parts.join(' ');
}
