/**
 * CPU time split between this process, Postgres and Redis while a benchmark section runs, read
 * from /proc (Linux only; elsewhere every figure is null). A snapshot sums utime + stime of this
 * process (all its threads), of the `postgres` processes serving it (or all of them) and of every
 * `redis-server` process (shared with anyone else using that Redis; a server a bench starts
 * itself can be named by pid, so it counts whatever its process is called),
 * and reads the machine's busy and idle time from /proc/stat. The difference of two snapshots
 * is the CPU seconds each side spent in between. Postgres backends that exit in between lose
 * their last ticks (the pools stay open during a drain, so that does not happen there).
 */
import { readdirSync, readFileSync } from 'node:fs';

/** Clock ticks per second of /proc figures; 100 on every Linux this runs on (getconf CLK_TCK). */
export const CLK_TCK = 100;

export type CpuSnapshot = {
  /** Ticks per pid, for every process: `side` names the processes of interest. */
  procs: Map<number, { side: CpuSide | undefined; comm: string; ticks: number; sys: number }>;
  /** Machine-wide busy and idle ticks (all cores), and the part spent in interrupts. */
  busy: number;
  idle: number;
  irq: number;
};

export type CpuSide = 'node' | 'postgres' | 'redis';

/**
 * CPU seconds spent between two snapshots (`nodeSys`: the kernel part of `node`, mostly socket
 * system calls); `other` is busy time of anything else (other
 * processes, interrupt and softirq time), `irq` the interrupt part of it, `others` the busiest
 * other processes by name.
 */
export type CpuSplit = Record<CpuSide | 'other' | 'idle' | 'irq' | 'nodeSys', number> & {
  others: [string, number][];
};

/** One process's command name and CPU clock ticks (user + system, and system alone); undefined once it has exited or where /proc is not. */
export function procTicks(pid: number): { comm: string; ticks: number; sys: number } | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const close = stat.lastIndexOf(')');
    const comm = stat.slice(stat.indexOf('(') + 1, close);
    // Fields after the command: state is field 3, utime field 14, stime field 15.
    const rest = stat.slice(close + 2).split(' ');
    return { comm, ticks: Number(rest[11]) + Number(rest[12]), sys: Number(rest[12]) };
  } catch {
    return undefined; // the process exited meanwhile
  }
}

/**
 * @param postgresPids when given, only these `postgres` processes count as Postgres (this run's
 * backends and the server's auxiliary processes); other sessions' backends count as `other`.
 * @param nodePids processes that count as `node` besides this one (a bench's worker children).
 * @param redisPids processes that count as `redis` besides every `redis-server` (a bench's own server).
 */
export function cpuSnapshot(
  postgresPids?: ReadonlySet<number>,
  nodePids?: ReadonlySet<number>,
  redisPids?: ReadonlySet<number>,
): CpuSnapshot | undefined {
  let pids: string[];
  let cpuLine: string | undefined;
  try {
    pids = readdirSync('/proc').filter((d) => /^\d+$/.test(d));
    cpuLine = readFileSync('/proc/stat', 'utf8').split('\n')[0];
  } catch {
    return undefined;
  }
  const procs: CpuSnapshot['procs'] = new Map();
  for (const p of pids) {
    const pid = Number(p);
    const t = procTicks(pid);
    if (!t) continue;
    const side: CpuSide | undefined =
      pid === process.pid || nodePids?.has(pid)
        ? 'node'
        : t.comm === 'postgres' && (!postgresPids || postgresPids.has(pid))
          ? 'postgres'
          : t.comm === 'redis-server' || redisPids?.has(pid)
            ? 'redis'
            : undefined;
    procs.set(pid, { side, comm: t.comm, ticks: t.ticks, sys: t.sys });
  }
  // cpu  user nice system idle iowait irq softirq steal ...
  const f = (cpuLine ?? '').trim().split(/\s+/).slice(1).map(Number);
  const idle = (f[3] ?? 0) + (f[4] ?? 0);
  const busy = f.slice(0, 8).reduce((a, b) => a + b, 0) - idle;
  const irq = (f[5] ?? 0) + (f[6] ?? 0);
  return { procs, busy, idle, irq };
}

export function cpuSplit(before: CpuSnapshot | undefined, after: CpuSnapshot | undefined): CpuSplit | undefined {
  if (!before || !after) return undefined;
  const out: CpuSplit = { node: 0, nodeSys: 0, postgres: 0, redis: 0, other: 0, idle: 0, irq: 0, others: [] };
  const others = new Map<string, number>();
  for (const [pid, now] of after.procs) {
    const seconds = (now.ticks - (before.procs.get(pid)?.ticks ?? 0)) / CLK_TCK;
    if (now.side) out[now.side] += seconds;
    else if (seconds > 0) others.set(now.comm, (others.get(now.comm) ?? 0) + seconds);
    if (now.side === 'node') out.nodeSys += (now.sys - (before.procs.get(pid)?.sys ?? 0)) / CLK_TCK;
  }
  out.others = [...others].sort((a, b) => b[1] - a[1]).slice(0, 3);
  out.idle = (after.idle - before.idle) / CLK_TCK;
  out.irq = (after.irq - before.irq) / CLK_TCK;
  out.other = Math.max(0, (after.busy - before.busy) / CLK_TCK - out.node - out.postgres - out.redis);
  return out;
}

/** The split scaled to CPU seconds per 1000 units of work (jobs, events, rows). */
export function perThousand(split: CpuSplit, count: number): CpuSplit {
  const scale = (x: number) => (x * 1000) / count;
  return {
    node: scale(split.node),
    nodeSys: scale(split.nodeSys),
    postgres: scale(split.postgres),
    redis: scale(split.redis),
    other: scale(split.other),
    idle: scale(split.idle),
    irq: scale(split.irq),
    others: split.others.map(([comm, sec]) => [comm, scale(sec)]),
  };
}
