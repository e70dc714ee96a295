/**
 * Cost, measured as this process's CPU time: on a machine shared with other test runs a wall
 * clock mostly measures the neighbours, while CPU time counts only the work. Tests compare two
 * costs measured in the same run (a growth ratio, a reference operation); never an absolute bound.
 */

/** CPU time (user + system, ms) this process spent in `fn`. */
export function cpuMs(fn: () => unknown): number {
  const start = process.cpuUsage();
  fn();
  const used = process.cpuUsage(start);
  return (used.user + used.system) / 1000;
}

/** The median CPU time of `runs` calls of `run` on fresh inputs (built outside the measurement). */
export function medianCpuMs<T>(build: () => T, run: (input: T) => unknown, runs = 5): number {
  const times: number[] = [];
  for (let i = 0; i < runs; i++) {
    const input = build();
    times.push(cpuMs(() => run(input)));
  }
  times.sort((a, b) => a - b);
  return times[Math.floor(times.length / 2)] as number;
}
