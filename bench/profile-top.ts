/**
 * Summarises a V8 .cpuprofile (from node --cpu-prof, e.g. BENCH_CPU_PROF=1 npm run bench):
 * the top functions by self time, and self time grouped by where the code lives (our src/, each
 * node_modules package, node internals, GC). Usage: tsx bench/profile-top.ts <file.cpuprofile> [top=15]
 */
import { readFileSync } from 'node:fs';
import { basename } from 'node:path';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

function where(url: string): string {
  if (url === '') return '(native/VM)';
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (pkg) return pkg[1]!;
  if (url.startsWith('node:')) return 'node internals';
  const src = /\/(src|bench|migrations)\/(.+)$/.exec(url);
  if (src) return `${src[1]}/${src[2]}`;
  return url;
}

function label(node: ProfileNode): string {
  const { functionName, url, lineNumber } = node.callFrame;
  const name = functionName || '(anonymous)';
  if (url === '') return name;
  const file = /node_modules\/(.+)$/.exec(url)?.[1] ?? /\/((?:src|bench)\/.+)$/.exec(url)?.[1] ?? basename(url);
  return `${name} ${file}:${lineNumber + 1}`;
}

export function summarise(path: string, top = 15): string {
  const profile = JSON.parse(readFileSync(path, 'utf8')) as Profile;
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const selfUs = new Map<number, number>();
  // timeDeltas[i] is the time between sample i-1 and sample i; attribute it to sample i.
  for (let i = 0; i < profile.samples.length; i++) {
    const id = profile.samples[i]!;
    selfUs.set(id, (selfUs.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0));
  }
  const total = [...selfUs.values()].reduce((a, b) => a + b, 0);
  const idle = [...selfUs.entries()].filter(([id]) => byId.get(id)?.callFrame.functionName === '(idle)').reduce((a, [, us]) => a + us, 0);
  const busy = total - idle;
  const byFunction = new Map<string, number>();
  const byPlace = new Map<string, number>();
  for (const [id, us] of selfUs) {
    const node = byId.get(id)!;
    if (node.callFrame.functionName === '(idle)') continue;
    const key = label(node);
    byFunction.set(key, (byFunction.get(key) ?? 0) + us);
    const place = node.callFrame.url === '' ? node.callFrame.functionName || '(native/VM)' : where(node.callFrame.url);
    byPlace.set(place, (byPlace.get(place) ?? 0) + us);
  }
  const pct = (us: number) => `${((100 * us) / busy).toFixed(1).padStart(5)}%`;
  const ms = (us: number) => `${(us / 1000).toFixed(0).padStart(7)} ms`;
  const lines = [
    `${basename(path)}: ${(total / 1e6).toFixed(1)} s profiled, ${(busy / 1e6).toFixed(1)} s busy (${((100 * busy) / total).toFixed(0)}%)`,
    `top ${top} functions by self time (share of busy time):`,
    ...[...byFunction.entries()].sort((a, b) => b[1] - a[1]).slice(0, top).map(([k, us]) => `  ${ms(us)} ${pct(us)}  ${k}`),
    'self time by location:',
    ...[...byPlace.entries()].sort((a, b) => b[1] - a[1]).slice(0, 12).map(([k, us]) => `  ${ms(us)} ${pct(us)}  ${k}`),
  ];
  return lines.join('\n');
}

if (process.argv[1] && /profile-top\.ts$/.test(process.argv[1])) {
  const files = process.argv.slice(2).filter((a) => !/^\d+$/.test(a));
  const top = Number(process.argv.slice(2).find((a) => /^\d+$/.test(a)) ?? 15);
  if (files.length === 0) {
    process.stderr.write('usage: tsx bench/profile-top.ts <file.cpuprofile>... [top]\n');
    process.exit(2);
  }
  for (const file of files) process.stdout.write(`${summarise(file, top)}\n\n`);
}
