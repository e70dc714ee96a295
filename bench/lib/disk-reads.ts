/**
 * Bytes read from and written to the machine's block devices (/proc/diskstats, whole disks and
 * partitions alike counted once: only devices without a partition number), Linux only (elsewhere
 * undefined). The difference of two readings is the disk traffic in between, of every process.
 */
import { readFileSync } from 'node:fs';

export type DiskReading = { read: number; written: number };

export function diskReading(): DiskReading | undefined {
  try {
    let read = 0;
    let written = 0;
    for (const line of readFileSync('/proc/diskstats', 'utf8').split('\n')) {
      const f = line.trim().split(/\s+/);
      const name = f[2];
      // Whole disks only (vda, sda, nvme0n1), not their partitions (vda1, nvme0n1p1) nor loop/ram devices.
      if (!name || /^(loop|ram|dm-)/.test(name) || /^(s|v|xv|h)d[a-z]+\d+$/.test(name) || /p\d+$/.test(name)) continue;
      read += Number(f[5]) * 512;
      written += Number(f[9]) * 512;
    }
    return { read, written };
  } catch {
    return undefined;
  }
}

export const diskSince = (before: DiskReading | undefined, after: DiskReading | undefined): DiskReading | undefined =>
  before && after ? { read: after.read - before.read, written: after.written - before.written } : undefined;
