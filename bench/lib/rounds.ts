/** `items` rotated left by `round` places: each round starts with another item, none always first. */
export function rotated<T>(items: readonly T[], round: number): T[] {
  const k = items.length ? round % items.length : 0;
  return [...items.slice(k), ...items.slice(0, k)];
}

/**
 * Runs every variant once per round, in an order rotated every round, and collects the
 * measurements per variant by round (index = round). `run` gets the variant and the round (0-based).
 */
export async function alternatingRounds<V extends string | number, M>(
  variants: readonly V[],
  rounds: number,
  run: (variant: V, round: number) => Promise<M>,
): Promise<Map<V, M[]>> {
  const out = new Map<V, M[]>(variants.map((v) => [v, []]));
  for (let round = 0; round < rounds; round++) {
    for (const v of rotated(variants, round)) out.get(v)![round] = await run(v, round);
  }
  return out;
}
