import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';

/**
 * Readers of /proc for a child process: CPU time and memory as the kernel accounts them, so the
 * numbers include everything the process did (GC, libuv threads) without instrumenting it.
 */

let ticksPerSecond: number | undefined;

function clockTicks(): number {
  if (ticksPerSecond === undefined) {
    try {
      ticksPerSecond = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
    } catch {
      ticksPerSecond = 100;
    }
  }
  return ticksPerSecond;
}

/** User + system CPU seconds the process has used so far (fields 14 and 15 of /proc/<pid>/stat). */
export function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // The command name is in parentheses and may contain spaces: count fields after the last ')'.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const utime = Number(fields[11]);
  const stime = Number(fields[12]);
  return (utime + stime) / clockTicks();
}

function statusField(pid: number, name: string): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const match = new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(status);
  if (!match) throw new Error(`no ${name} in /proc/${pid}/status`);
  return Number(match[1]) * 1024;
}

/** Resident set size now, in bytes. */
export const rssBytes = (pid: number): number => statusField(pid, 'VmRSS');

/** The highest resident set size the process has ever had ("high water mark"), in bytes. */
export const peakRssBytes = (pid: number): number => statusField(pid, 'VmHWM');

export const mb = (bytes: number): number => bytes / (1024 * 1024);

/**
 * True when `pid` itself holds a listening TCP socket on `port`. Other processes on a shared
 * machine may answer on a port too; only this proves that /healthz will reach our child.
 */
export function listensOn(pid: number, port: number): boolean {
  const inodes = new Set<string>();
  const hexPort = port.toString(16).toUpperCase().padStart(4, '0');
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text: string;
    try {
      text = readFileSync(table, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      const cols = line.trim().split(/\s+/);
      // cols[1] = local address:port, cols[3] = state (0A = LISTEN), cols[9] = inode
      if (cols[1]?.endsWith(`:${hexPort}`) && cols[3] === '0A' && cols[9]) inodes.add(cols[9]);
    }
  }
  if (inodes.size === 0) return false;
  let fds: string[];
  try {
    fds = readdirSync(`/proc/${pid}/fd`);
  } catch {
    return false;
  }
  for (const fd of fds) {
    try {
      const link = readlinkSync(`/proc/${pid}/fd/${fd}`);
      const inode = /^socket:\[(\d+)\]$/.exec(link)?.[1];
      if (inode && inodes.has(inode)) return true;
    } catch {
      // closed meanwhile
    }
  }
  return false;
}

/** The machine's CPU time so far (all cores), busy and total, in clock ticks, from /proc/stat. */
export function machineCpu(): { busy: number; total: number } {
  const fields = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
  const total = fields.reduce((a, b) => a + b, 0);
  const idle = (fields[3] ?? 0) + (fields[4] ?? 0); // idle + iowait
  return { busy: total - idle, total };
}

/** Share of the machine's CPU that was busy between two readings of machineCpu(). */
export function busyShare(from: { busy: number; total: number }, to: { busy: number; total: number }): number {
  return to.total > from.total ? (to.busy - from.busy) / (to.total - from.total) : 0;
}
