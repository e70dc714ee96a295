/** The median (the mean of the two middle values of an even count); NaN for no values. */
export function median(values: readonly number[]): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

export const round2 = (x: number): number => Math.round(x * 100) / 100;

/** a / b rounded to two decimals. */
export const ratio = (a: number, b: number): number => round2(a / b);

/** Element-wise a[i] / b[i] over the rounds both ran. */
export function perRoundRatios(a: readonly number[], b: readonly number[]): number[] {
  return a.flatMap((x, i) => (b[i] === undefined ? [] : [x / b[i]!]));
}
